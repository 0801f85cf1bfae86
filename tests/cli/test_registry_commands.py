"""The registry's CLI through `ranker`'s own entry point: exit codes, JSON summaries, step files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scoresets import make_eval_day, with_scores

from ranking.cli.main import main
from ranking.core.workspace import Workspace
from ranking.registry import register_run

RunFactory = Callable[..., Path]


def ranker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(list(argv))
    out = capsys.readouterr().out.strip()
    return code, (json.loads(out.splitlines()[-1]) if out else {})


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "home")


def test_first_run_gate_promote_list(
    ws: Workspace, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(ws.root)
    version = register_run(ws, make_run(), "day-1")
    code, gate = ranker(capsys, "gate", "--candidate", version, "--home", home, "--json", "--run-id", "day-1")
    assert code == 0, gate
    assert gate["decision"] == "pass" and gate["champion"] is None and gate["failed_checks"] == []
    assert gate["candidate"]["version"] == version and gate["relative_change"] is None and gate["ci"] is None
    assert {c["name"] for c in gate["checks"]} == {
        "scores_finite",
        "scores_not_constant",
        "calibration",
        "save_hit_at_3_floor",
        "window_age",  # a first candidate is still checked for a stale window
    }
    assert gate["step"] == "gate" and gate["duration_seconds"] >= 0
    recorded = json.loads(ws.step_summary_path("day-1", "gate").read_text())
    assert recorded["decision"] == "pass" and recorded["run_id"] == "day-1"

    code, promote = ranker(
        capsys, "promote", version, "--reason", "first model", "--home", home, "--json", "--run-id", "day-1"
    )
    assert code == 0
    assert (promote["version"], promote["previous"], promote["reason"], promote["forced"]) == (
        version,
        None,
        "first model",
        False,
    )
    code, listing = ranker(capsys, "models", "list", "--home", home, "--json")
    assert code == 0 and listing["champion"] == version
    assert [(v["version"], v["status"]) for v in listing["versions"]] == [(version, "champion")]
    assert listing["history"][0]["to"] == version and listing["history"][0]["run_id"] == "day-1"

    # human-readable output names the champion and the history
    assert main(["models", "list", "--home", home]) == 0
    text = capsys.readouterr().out
    assert "champion: v0001" in text and "promote: (none) -> v0001" in text


def test_rejected_candidate_cannot_be_promoted_without_force(
    ws: Workspace, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(ws.root)
    frame, _ = make_eval_day(seed=4)
    random_scores = np.random.default_rng(0).uniform(0.03, 0.09, size=len(frame))
    version = register_run(ws, make_run(scores=with_scores(frame, random_scores)), None)
    code, gate = ranker(capsys, "gate", "--candidate", version, "--home", home, "--json")
    assert code == 1 and gate["decision"] == "reject" and gate["failed_checks"] == ["save_hit_at_3_floor"]
    code, reject = ranker(capsys, "reject", version, "--home", home, "--json", "--run-id", "r1")
    assert code == 0 and reject["failed_checks"] == ["save_hit_at_3_floor"]
    assert ws.step_summary_path("r1", "reject").is_file()

    assert main(["promote", version, "--reason", "try", "--home", home, "--json"]) == 2
    assert "refusing to promote v0001: it was rejected" in capsys.readouterr().err
    code, forced = ranker(
        capsys, "promote", version, "--reason", "incident 42: needed now", "--force", "--home", home, "--json"
    )
    assert code == 0 and forced["forced"] is True
    code, shown = ranker(capsys, "models", "show", version, "--verify", "--home", home, "--json")
    assert code == 0 and shown["status"] == "champion" and shown["checksums_verified"]
    assert shown["verdict"]["rejected"]["reason"] == "gate rejected: save_hit_at_3_floor"


def test_rollback_command_and_checksum_errors(
    ws: Workspace, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(ws.root)
    v1, v2 = register_run(ws, make_run(), None), register_run(ws, make_run(), None)
    for v in (v1, v2):
        assert main(["promote", v, "--reason", "bootstrap", "--force", "--home", home, "--json"]) == 0
    capsys.readouterr()
    code, rb = ranker(
        capsys, "rollback", "--reason", "saves dropped", "--who", "oncall", "--home", home, "--json"
    )
    assert code == 0 and (rb["version"], rb["previous"], rb["who"]) == (v1, v2, "oncall")
    code, listing = ranker(capsys, "models", "list", "--home", home, "--json")
    assert listing["champion"] == v1 and [e["action"] for e in listing["history"]] == [
        "promote",
        "promote",
        "rollback",
    ]

    (ws.registry / "versions" / v2 / "model.pt").write_bytes(b"bit rot")
    assert main(["models", "show", v2, "--verify", "--home", home]) == 2
    assert "checksum mismatch: v0002/model.pt" in capsys.readouterr().err
    assert main(["rollback", "--to", v2, "--reason", "back", "--home", home]) == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["rollback", "--to", "../../etc", "--reason", "x", "--home", home])
    assert exc.value.code == 2 and "not a version id" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["promote", v1, "--home", home])  # --reason is required


def test_gate_errors_without_a_window_for_another_day(
    ws: Workspace, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    version = register_run(ws, make_run(), None)
    assert main(["gate", "--candidate", version, "--end", "2026-02-01", "--home", str(ws.root)]) == 2
    assert "no built window has eval day 2026-02-01" in capsys.readouterr().err
