"""Registry: versions, checksums, the champion alias, history, rollback — local and memory fs."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import fsspec
import pytest

from ranking.core.errors import RegistryError
from ranking.core.workspace import Workspace
from ranking.registry.store import (
    Registry,
    _train_summary,
    blessing_problem,
    champion_checkpoint,
    register_run,
    training_window,
    validate_version_id,
)

RunFactory = Callable[..., Path]


def bless(reg: Registry, version: str, champion: str | None = None) -> None:
    reg.record_verdict(version, {"decision": "pass", "failed_checks": [], "champion_version": champion})


def test_register_copies_the_run_with_checksums(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    run = make_run()
    version = reg.register(run, run_id="r1")
    assert version == "v0001"
    rec = reg.verify(version)
    assert set(rec.files) == {
        "model.pt",
        "model_config.json",
        "train_manifest.json",
        "eval.json",
        "eval_scores.parquet",
        "curve.png",
    }  # per-epoch checkpoints are not part of a version
    assert rec.run_id == "r1"
    assert rec.train["train_start"] == "2026-01-01" and rec.train["train_end"] == "2026-01-21"
    assert rec.train["schedule"] == "F,J,J"
    assert 0 < rec.eval["save_hit_at_3"] <= 1
    assert reg.read_file(version, "model.pt") == (run / "model.pt").read_bytes()
    assert reg.register(make_run(), run_id="r2") == "v0002"
    assert reg.version_ids() == ["v0001", "v0002"]
    assert reg.champion() is None and reg.history() == []


def test_unfinished_run_is_refused(registry_url: str, make_run: RunFactory) -> None:
    run = make_run()
    (run / "eval_scores.parquet").unlink()
    with pytest.raises(RegistryError, match=r"not finished: missing eval_scores\.parquet"):
        Registry(registry_url).register(run)
    assert Registry(registry_url).version_ids() == []


def test_versions_are_immutable(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    version = reg.register(make_run())
    rec = reg.record(version)
    with pytest.raises(RegistryError, match="immutable"):
        reg._commit_version(rec)


def test_checksum_mismatch_is_detected(registry_url: str, make_run: RunFactory, tmp_path: Path) -> None:
    reg = Registry(registry_url)
    version = reg.register(make_run())
    bless(reg, version)
    fs, root = fsspec.core.url_to_fs(registry_url)
    fs.pipe_file(f"{root}/versions/{version}/model.pt", b"tampered")
    with pytest.raises(RegistryError, match=r"checksum mismatch: v0001/model\.pt"):
        reg.verify(version)
    with pytest.raises(RegistryError, match="checksum mismatch"):
        reg.read_file(version, "model.pt")
    with pytest.raises(RegistryError, match="checksum mismatch"):
        reg.promote(version, reason="ship it")
    assert reg.champion() is None


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
    reg.record_verdict(v3, {"decision": "reject", "failed_checks": ["auc_drop"], "champion_version": v1})
    with pytest.raises(RegistryError, match=r"the gate rejected it \(auc_drop\)"):
        reg.promote(v3, reason="no")
    bless(reg, v3, champion=v1)
    reg.record_rejection(v3, "on-call says no", run_id=None, who="bob")
    with pytest.raises(RegistryError, match="it was rejected"):
        reg.promote(v3, reason="no")
    assert reg.status(v3, reg.champion()) == "rejected"
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


def test_incomplete_version_is_never_usable(tmp_path: Path, make_run: RunFactory) -> None:
    reg = Registry(str(tmp_path / "reg"))
    reg.store.create_exclusive("versions/v0001/claim.json", b"{}")  # a writer that died after claiming
    assert reg.status("v0001") == "incomplete"
    with pytest.raises(RegistryError, match="incomplete"):
        reg.promote("v0001", reason="x", force=True)
    assert reg.register(make_run()) == "v0002"


def test_invalid_version_ids_never_reach_paths(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path / "reg"))
    for bad in ("../etc", "v1/../../x", "latest", "v12", ""):
        with pytest.raises(RegistryError, match="invalid version id"):
            validate_version_id(bad)
        with pytest.raises(RegistryError, match="invalid version id"):
            reg.verdict(bad)


def test_champion_checkpoint_local_and_remote(tmp_path: Path, make_run: RunFactory) -> None:
    ws = Workspace(tmp_path / "home")
    assert champion_checkpoint(ws) is None
    version = register_run(ws, make_run(payload=b"local weights"), "r1")
    Registry.for_workspace(ws).promote(version, reason="first", force=True)
    local = champion_checkpoint(ws)
    assert local == ws.registry / "versions" / version / "model.pt"
    assert local is not None and local.read_bytes() == b"local weights"
    assert (local.parent / "model_config.json").is_file()

    url = "memory://remote-registry-test"
    version = register_run(ws, make_run(payload=b"remote weights"), "r2", registry=url)
    Registry(url).promote(version, reason="first", force=True)
    cached = champion_checkpoint(ws, registry=url)
    assert cached == ws.root / "cache" / "registry" / version / "model.pt"
    assert cached is not None and cached.read_bytes() == b"remote weights"
    cached.write_bytes(b"corrupted cache")  # a damaged cache copy is fetched again
    again = champion_checkpoint(ws, registry=url)
    assert again is not None and again.read_bytes() == b"remote weights"
    fsspec.filesystem("memory").pipe_file(f"/remote-registry-test/versions/{version}/model.pt", b"tampered")
    (ws.root / "cache" / "registry" / version / "model.pt").unlink()
    with pytest.raises(RegistryError, match="checksum mismatch"):
        champion_checkpoint(ws, registry=url)


def test_registry_url_from_environment(
    tmp_path: Path, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKER_REGISTRY", str(tmp_path / "elsewhere"))
    ws = Workspace(tmp_path / "home")
    register_run(ws, make_run(), None)
    assert (tmp_path / "elsewhere" / "versions" / "v0001" / "version.json").is_file()
    assert not ws.registry.exists()


def test_training_window_shapes() -> None:
    start, end = dt.date(2026, 1, 1), dt.date(2026, 1, 21)
    assert training_window({"window": {"end": "2026-01-21", "days": 20}}) == (start, end)
    assert training_window({"window_end": "2026-01-21", "window_days": 20}) == (start, end)
    assert training_window({"train_dates": ["2026-01-20", "2026-01-01"]}) == (start, end)
    assert training_window({"window": {"id": "x"}}) is None
    assert training_window({"end": "not a date", "days": 3}) is None
    summary = _train_summary({"window": {"end": "2026-01-21", "days": 20}, "epochs": [{}, {}, {}], "seed": 3})
    assert summary == {"epochs": 3, "seed": 3, "train_start": "2026-01-01", "train_end": "2026-01-21"}


def test_blessing_problem_cases() -> None:
    assert blessing_problem(None, None) == "it has not been through the gate"
    assert blessing_problem({"decision": "pass", "champion_version": "v0001"}, "v0001") is None
    assert "run the gate again" in str(
        blessing_problem({"decision": "pass", "champion_version": "v0001"}, "v0002")
    )
