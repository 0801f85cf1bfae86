"""The Registry facade: versions, checksums, verdicts, the trainer's interface — local and memory fs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import fsspec
import pytest
from registry_fixtures import bless

from ranking.core.errors import RegistryError
from ranking.core.workspace import Workspace
from ranking.registry import Registry, champion_checkpoint, register_run, validate_version_id

RunFactory = Callable[..., Path]


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
