"""`decide_candidate`: the policy fed from the registry (the candidate's verdict, the champion)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ranking.core.errors import RankerError, RegistryError
from ranking.pipeline.decide import DecideRequest, decide_candidate
from ranking.registry import Registry
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]
END = dt.date(2026, 1, 21)


def verdict(decision: str, *failed: str, eval_date: str = "2026-01-21") -> Verdict:
    return Verdict.model_validate(
        {
            "decision": decision,
            "failed_checks": list(failed),
            "eval_date": eval_date,
            "champion_version": None,
        }
    )


def test_each_branch_from_the_registry(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    v1, v2 = reg.register(make_run(end=END)), reg.register(make_run(end=END))
    reg.record_verdict(v1, verdict("pass"))
    reg.record_verdict(v2, verdict("reject", "auc_drop"))

    def ask(version: str, **kw: Any) -> dict[str, Any]:
        return decide_candidate(DecideRequest(registry=registry_url, candidate=version, end=END, **kw)).body()

    first = ask(v1, run_id="r1")
    assert (first["branch"], first["force"], first["champion"], first["champion_trained_for"]) == (
        "promote",
        False,
        None,
        None,
    )
    assert first["reason"] == "gate passed for window ending 2026-01-21 (run r1)"
    assert (first["version"], first["end"], first["decision"]) == (v1, "2026-01-21", "pass")
    rejected = ask(v2)
    assert rejected["branch"] == "record_rejection" and rejected["failed_checks"] == ["auc_drop"]
    forced = ask(v2, force_promote=True, reason="incident 7")
    assert forced["branch"] == "promote" and forced["force"] is True and "incident 7" in forced["reason"]
    assert ask(v1, dry_run=True)["branch"] == "keep_champion"

    # once v1 (trained for 2026-01-21) is champion, another passing candidate for that date is kept out
    reg.promote(v1, reason=first["reason"])
    reg.record_verdict(v2, verdict("pass"))
    kept = ask(v2)
    assert (kept["branch"], kept["champion"], kept["champion_trained_for"]) == (
        "keep_champion",
        v1,
        "2026-01-21",
    )
    assert ask(v2, force_promote=True, reason="retrained on fixed data")["branch"] == "promote"


def test_champion_trained_for_comes_from_its_version_record(tmp_path: Path, make_run: RunFactory) -> None:
    url = str(tmp_path / "reg")
    reg = Registry(url)
    champion = reg.register(make_run(end=dt.date(2026, 1, 20)))
    reg.promote(champion, reason="bootstrap", force=True)
    candidate = reg.register(make_run(end=END))
    reg.record_verdict(candidate, verdict("pass"))
    answer = decide_candidate(DecideRequest(registry=url, candidate=candidate, end=END)).body()
    assert (answer["branch"], answer["champion_trained_for"]) == ("promote", "2026-01-20")


def test_refuses_without_a_verdict_for_that_day(tmp_path: Path, make_run: RunFactory) -> None:
    url = str(tmp_path / "reg")
    reg = Registry(url)
    version = reg.register(make_run(end=END))
    with pytest.raises(RegistryError, match="has not been through the gate"):
        decide_candidate(DecideRequest(registry=url, candidate=version, end=END))
    reg.record_verdict(version, verdict("pass", eval_date="2026-01-22"))
    with pytest.raises(RegistryError, match="is for eval day 2026-01-22, not 2026-01-21"):
        decide_candidate(DecideRequest(registry=url, candidate=version, end=END))
    with pytest.raises(RegistryError, match="unknown version v0009"):
        decide_candidate(DecideRequest(registry=url, candidate="v0009", end=END))


def test_contradicting_requests_are_refused_before_reading_anything() -> None:
    with pytest.raises(RankerError, match="--force-promote needs --reason"):
        DecideRequest(registry="unused", candidate="v0001", end=END, force_promote=True)
    with pytest.raises(RankerError, match="contradict"):
        DecideRequest(
            registry="unused", candidate="v0001", end=END, force_promote=True, reason="x", dry_run=True
        )
