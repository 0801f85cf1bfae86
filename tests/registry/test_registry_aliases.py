"""The champion alias: promotion preconditions, no-op reruns, history files, rollback."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from registry_fixtures import bless

from ranking.core.errors import RegistryError
from ranking.registry import AliasEvent, Registry
from ranking.registry.aliases import rollback_target
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]


def test_promote_needs_a_blessing_or_force_with_reason(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    v1 = reg.register(make_run())
    with pytest.raises(RegistryError, match="has not been through the gate"):
        reg.promote(v1, reason="because")
    with pytest.raises(RegistryError, match="needs a reason"):
        reg.promote(v1, reason="  ", force=True)
    event, previous = reg.promote(v1, reason="bootstrap the registry", force=True, run_id="r1", who="alice")
    assert event is not None and previous is None
    assert event.forced and event.who == "alice" and event.reason == "bootstrap the registry"
    assert event.blessing and event.blessing["problem"] == "it has not been through the gate"
    assert reg.champion() == v1

    v2 = reg.register(make_run())
    bless(reg, v2, champion=v1)
    event, previous = reg.promote(v2, reason="gate passed")
    assert event is not None and not event.forced and previous == v1
    assert [(e.from_version, e.to_version) for e in reg.history()] == [(None, v1), (v1, v2)]


def test_promote_refuses_stale_or_negative_verdicts(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    v1, v2, v3 = (reg.register(make_run()) for _ in range(3))
    bless(reg, v1)
    bless(reg, v2)  # gated when there was no champion
    reg.promote(v1, reason="first")
    with pytest.raises(RegistryError, match="compared it with no champion, but the champion is now v0001"):
        reg.promote(v2, reason="stale")
    reg.record_verdict(v3, Verdict(decision="reject", failed_checks=["auc_drop"], champion_version=v1))
    with pytest.raises(RegistryError, match=r"the gate rejected it \(auc_drop\)"):
        reg.promote(v3, reason="no")
    bless(reg, v3, champion=v1)
    reg.record_rejection(v3, "on-call says no", run_id=None, who="bob")
    with pytest.raises(RegistryError, match="it was rejected"):
        reg.promote(v3, reason="no")
    assert reg.status(v3, reg.champion()) == "rejected-by-operator"  # the gate passed it last
    assert reg.champion() == v1 and len(reg.history()) == 1


def test_promoting_the_champion_again_is_a_noop(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    v1 = reg.register(make_run())
    bless(reg, v1)
    reg.promote(v1, reason="first")
    event, previous = reg.promote(v1, reason="rerun of the same task")
    assert event is None and previous == v1
    assert len(reg.history()) == 1


def test_rollback_restores_the_previous_champion_and_is_recorded(
    registry_url: str, make_run: RunFactory
) -> None:
    reg = Registry(registry_url)
    v1, v2, v3 = (reg.register(make_run()) for _ in range(3))
    with pytest.raises(RegistryError, match="no champion"):
        reg.rollback(reason="nothing yet")
    for v in (v1, v2, v3):
        reg.promote(v, reason=f"ship {v}", force=True)
    event = reg.rollback(reason="v3 hurts saves online", who="oncall", run_id="rb-1")
    assert (event.from_version, event.to_version, event.action) == (v3, v2, "rollback")
    assert reg.champion() == v2
    # a second rollback keeps going back instead of returning to the version just rolled back from
    event = reg.rollback(reason="v2 too")
    assert (event.from_version, event.to_version) == (v2, v1)
    with pytest.raises(RegistryError, match="nothing to roll back to"):
        reg.rollback(reason="again")
    event = reg.rollback(to=v3, reason="v3 was fine after all")
    assert reg.champion() == v3
    history = reg.history()
    assert [e.seq for e in history] == [1, 2, 3, 4, 5, 6]
    assert [e.action for e in history] == ["promote"] * 3 + ["rollback"] * 3
    assert history[3].who == "oncall" and history[3].reason == "v3 hurts saves online"
    with pytest.raises(RegistryError, match="already is the champion"):
        reg.rollback(to=v3, reason="same")


def test_history_files_are_append_only_json_events(tmp_path: Path, make_run: RunFactory) -> None:
    reg = Registry(str(tmp_path / "reg"))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True, run_id="r-1", who="alice")
    event = json.loads((tmp_path / "reg" / "aliases" / "champion" / "00000001.json").read_text())
    assert {"seq", "from", "to", "when", "run_id", "reason", "who", "action", "forced"} <= set(event)
    assert (event["from"], event["to"], event["run_id"], event["who"]) == (None, v1, "r-1", "alice")
    dt.datetime.fromisoformat(event["when"])


def _event(seq: int, src: str | None, dst: str, action: str = "promote") -> AliasEvent:
    return AliasEvent(seq, "champion", src, dst, action, "2026-01-01T00:00:00+00:00", None, "r", "who")


def test_rollback_target_walks_back_past_versions_rolled_back_from() -> None:
    promotions = [_event(1, None, "v0001"), _event(2, "v0001", "v0002"), _event(3, "v0002", "v0003")]
    assert rollback_target(promotions) == "v0002"
    once = [*promotions, _event(4, "v0003", "v0002", "rollback")]
    assert rollback_target(once) == "v0001"  # not back to v0003, which was rolled back from
    with pytest.raises(RegistryError, match="no champion"):
        rollback_target([])
    with pytest.raises(RegistryError, match="only version"):
        rollback_target([_event(1, None, "v0001")])
