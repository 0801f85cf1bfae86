"""Version records: the training window and summary a version carries, alias event round trips."""

from __future__ import annotations

import datetime as dt

import pytest

from ranking.registry import AliasEvent, current_actor, training_window
from ranking.registry.records import train_summary


def test_training_window_shapes() -> None:
    start, end = dt.date(2026, 1, 1), dt.date(2026, 1, 21)
    assert training_window({"window": {"end": "2026-01-21", "days": 20}}) == (start, end)
    # only the shape the trainer writes (ranking/trainer/loop.py: window = the window manifest's
    # summary); the alternatives an earlier reader guessed at are not read
    assert training_window({"window_end": "2026-01-21", "window_days": 20}) is None
    assert training_window({"train_dates": ["2026-01-20", "2026-01-01"]}) is None
    assert training_window({"end": "2026-01-21", "days": 20}) is None
    assert training_window({"window": {"id": "x"}}) is None
    assert training_window({"end": "not a date", "days": 3}) is None
    assert training_window({"window": {"end": "not a date", "days": 3}}) is None
    summary = train_summary({"window": {"end": "2026-01-21", "days": 20}, "epochs": [{}, {}, {}], "seed": 3})
    assert summary == {"epochs": 3, "seed": 3, "train_start": "2026-01-01", "train_end": "2026-01-21"}


def test_train_summary_of_a_trainer_manifest() -> None:
    """The fields ranking/trainer/loop.py writes into train_manifest.json."""
    manifest = {
        "schedule": "F,J,J",
        "schedule_spec": "delayed",
        "pipeline": "semisync",
        "seed": 0,
        "epochs": [{"epoch": 1}, {"epoch": 2}, {"epoch": 3}],
        "warm_start": {"source": "champion v0001", "path": "/x/model.pt", "scope": "all"},
        "window": {
            "window_id": "abc",
            "manifest": "/w/manifest.json",
            "end": "2026-01-21",
            "days": 20,
            "rows_train": 10,
            "rows_eval": 2,
            "feature_version": "fv1",
            "train_dates": ["2026-01-01"],
            "eval_date": "2026-01-21",
        },
        "window_id": "abc",
        "window_manifest": "/w/manifest.json",
        "feature_version": "fv1",
        "train_config": {"lr": 0.1},
        "code_version": "deadbeef",
        "world_size": 1,
        "created_at": "2026-01-22T00:00:00+00:00",
    }
    assert train_summary(manifest) == {
        "schedule": "F,J,J",
        "epochs": 3,
        "seed": 0,
        "pipeline": "semisync",
        "window_id": "abc",
        "feature_version": "fv1",
        "code_version": "deadbeef",
        "train_start": "2026-01-01",
        "train_end": "2026-01-21",
        "warm_start": {"source": "champion v0001", "path": "/x/model.pt", "scope": "all"},
    }


def test_alias_events_round_trip_with_from_and_to() -> None:
    event = AliasEvent(
        3, "champion", "v0001", "v0002", "promote", "2026-01-01T00:00:00+00:00", "r", "why", "me"
    )
    d = event.to_dict()
    assert (d["from"], d["to"]) == ("v0001", "v0002") and "from_version" not in d
    assert AliasEvent.from_dict(d) == event


def test_current_actor_prefers_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKER_ACTOR", "airflow:alice")
    assert current_actor() == "airflow:alice"
    monkeypatch.delenv("RANKER_ACTOR")
    assert current_actor()  # the OS user, or "unknown" without a passwd entry


def test_a_stored_verdict_reads_typed_keeps_the_report_and_names_a_bad_file() -> None:
    """The verdict is a model next to its writer: a file written before a field existed reads with
    its default, the rest of the gate report is kept, and a file that is not a verdict is one line."""
    from ranking.core.errors import RegistryError
    from ranking.registry.records import Verdict

    old = {"decision": "pass", "champion_version": None, "checks": [{"name": "auc_drop"}]}
    verdict = Verdict.read(old, "verdicts/v0001.json")
    assert (verdict.decision, verdict.failed_checks, verdict.rejected) == ("pass", [], None)
    assert verdict.to_dict()["checks"] == [{"name": "auc_drop"}]
    with pytest.raises(RegistryError, match=r"verdicts/v0002.json: not a gate verdict \(decision: "):
        Verdict.read({"decision": "maybe"}, "verdicts/v0002.json")
    with pytest.raises(RegistryError, match=r"not a gate verdict \(failed_checks: "):
        Verdict.read({"failed_checks": "auc_drop"}, "verdicts/v0003.json")
