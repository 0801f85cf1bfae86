"""`models list` statuses, each from a real registry built by the moves that lead to it, and the
one table in docs/registry.md that documents them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.registry import Registry
from ranking.registry.blessing import VERSION_STATUSES
from ranking.registry.operations import ListRequest, ShowRequest, list_models, show_model
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]
DOC = Path(__file__).resolve().parents[2] / "docs" / "registry.md"


def _every_status(reg: Registry, make_run: RunFactory) -> dict[str, str]:
    """Versions brought to each status by the registry's own operations: {version: expected}."""
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    v2 = reg.register(make_run())
    reg.record_verdict(v2, Verdict(decision="pass", champion_version=v1))
    reg.promote(v2, reason="second")
    v3 = reg.register(make_run())
    reg.record_verdict(v3, Verdict(decision="pass", champion_version=v2))
    reg.promote(v3, reason="third")
    reg.rollback(reason="saves dropped")  # v3 -> v2
    old_base, base = reg.register(make_run()), reg.register(make_run())
    reg.set_base(old_base, reason="pretrained")
    reg.set_base(base, reason="pretrained again")
    dry_run = reg.register(make_run())  # the gate rejected it; a dry run records no rejection
    reg.record_verdict(dry_run, Verdict(decision="reject", failed_checks=["auc_drop"], champion_version=v2))
    recorded = reg.register(make_run())  # the gate rejected it and the run recorded it
    reg.record_verdict(recorded, Verdict(decision="reject", failed_checks=["leakage"], champion_version=v2))
    reg.record_rejection(recorded, "gate rejected: leakage", run_id="day-9")
    vetoed = reg.register(make_run())  # the gate passed it; an operator rejected it
    reg.record_verdict(vetoed, Verdict(decision="pass", champion_version=v2))
    reg.record_rejection(vetoed, "on-call: saves dropped in the canary", run_id=None, who="oncall")
    promotable = reg.register(make_run())
    reg.record_verdict(promotable, Verdict(decision="pass", champion_version=v2))
    stale = reg.register(make_run())  # passed against v1, a champion two moves ago
    reg.record_verdict(stale, Verdict(decision="pass", champion_version=v1))
    ungated = reg.register(make_run())
    incomplete = reg.register(make_run())
    reg.store.remove(f"versions/{incomplete}/version.json")  # as a writer killed mid-copy leaves it
    return {
        v1: "former-champion",
        v2: "champion",
        v3: "rolled-back-from",
        old_base: "former-base",
        base: "base",
        dry_run: "rejected-by-gate",
        recorded: "rejected-by-gate",
        vetoed: "rejected-by-operator",
        promotable: "promotable",
        stale: "needs-regate",
        ungated: "ungated",
        incomplete: "incomplete",
    }


def test_every_status_from_a_real_registry(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    expected = _every_status(reg, make_run)
    assert sorted(set(expected.values())) == sorted(VERSION_STATUSES)  # every status is reached
    listing = list_models(ListRequest(registry=registry_url))
    assert {r.version: r.status for r in listing.versions} == expected
    assert {v: reg.status(v, reg.champion()) for v in expected} == expected  # one version at a time
    complete = [v for v, s in expected.items() if s != "incomplete"]
    assert {v: show_model(ShowRequest(registry=registry_url, version=v)).status for v in complete} == {
        v: expected[v] for v in complete
    }


def test_models_list_json_and_text_name_the_statuses(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "registry")
    expected = _every_status(Registry(root), make_run)
    capsys.readouterr()
    assert main(["models", "list", "--registry", root, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert {r["version"]: r["status"] for r in listing["versions"]} == expected
    assert main(["models", "list", "--registry", root]) == 0
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^  (v\d+)[* ] ([a-z-]+)", capsys.readouterr().out, flags=re.MULTILINE)
    }
    assert rows == expected


def test_docs_registry_has_one_table_of_every_status() -> None:
    text = DOC.read_text()
    heading = text.index("## Statuses")
    table = re.findall(r"^\| `([a-z-]+)` \|", text[heading:].split("\n## ", 1)[0], flags=re.MULTILINE)
    assert table == list(VERSION_STATUSES)
