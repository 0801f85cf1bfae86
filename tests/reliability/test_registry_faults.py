"""Registry faults: file modes and unreadable folders, the verdict read inside the
compare-and-swap, orphan temps under aliases/, and stale blessings in the listing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_fixtures import RunFactory

from ranking.cli.main import main
from ranking.core.atomic import atomic_dir, atomic_write_text, current_umask
from ranking.core.errors import RegistryError
from ranking.registry import AliasEvent, Registry
from ranking.registry.records import Verdict


@pytest.fixture
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_umask_is_read_without_changing_it(umask_022: None) -> None:
    assert current_umask() == 0o022
    os.umask(0o027)
    assert current_umask() == 0o027
    assert current_umask() == 0o027  # reading twice changes nothing


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_atomic_writes_honour_the_umask(
    tmp_path: Path, umask: int, file_mode: int, dir_mode: int, umask_022: None
) -> None:
    os.umask(umask)
    atomic_write_text(tmp_path / "metrics" / "ranker.prom", "x 1\n")
    assert _mode(tmp_path / "metrics" / "ranker.prom") == file_mode
    with atomic_dir(tmp_path / "day") as tmp:
        (tmp / "part-0.parquet").write_bytes(b"x")
    assert _mode(tmp_path / "day") == dir_mode


def test_registry_files_are_readable_by_other_users(
    tmp_path: Path, make_run: RunFactory, umask_022: None
) -> None:
    reg = Registry(str(tmp_path / "reg"))
    v1 = reg.register(make_run())
    reg.record_verdict(v1, Verdict(decision="pass", champion_version=None))
    reg.promote(v1, reason="first")
    root = tmp_path / "reg"
    files = [p for p in root.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {
        "claim.json",
        "version.json",
        "model.pt",
        "00000001.json",
        "v0001.json",
    }
    for path in files:
        assert _mode(path) == 0o644, path


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def unreadable_version(tmp_path: Path, make_run: RunFactory) -> Iterator[tuple[Path, Path]]:
    """A registry whose champion is v0003 (v0004 a candidate); the tests make v0003's folder
    unreadable."""
    root = tmp_path / "registry"
    reg = Registry(str(root))
    versions = [reg.register(make_run()) for _ in range(4)]
    for v in versions[:3]:
        reg.promote(v, reason=f"ship {v}", force=True)
    folder = root / "versions" / "v0003"
    yield root, folder
    folder.chmod(0o755)


def test_an_unreadable_version_folder_is_one_line_not_an_incomplete_version(
    unreadable_version: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Injected (runs as root too, which permissions do not stop): stat under the folder fails
    with EACCES, as it does for a user who may not search it."""
    root, folder = unreadable_version
    real_stat = os.stat

    def denied_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).startswith(f"{folder}/"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", denied_stat)
    assert main(["models", "list", "--home", str(tmp_path), "--registry", str(root)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"permission denied (EACCES): {folder}/" in line, line


def test_an_unreadable_registry_folder_is_one_line_for_a_real_user(
    unreadable_version: tuple[Path, Path], tmp_path: Path
) -> None:
    """The real thing: a process that may not search versions/v0003. Root is not stopped by
    permissions, so as root the child runs without the DAC capabilities (setpriv)."""
    root, folder = unreadable_version
    folder.chmod(0)
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("needs root without DAC capabilities: setpriv(1) is not installed")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"]
    argv = ["models", "list", "--home", str(tmp_path / "h"), "--registry", str(root)]
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "ranking.cli", *argv],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr + proc.stdout
    line = _one_line(proc.stderr)
    assert f"permission denied (EACCES): {folder}/" in line, line


class _RaceOnce:
    """Wraps the store's exclusive create: the first alias create loses a race to another writer,
    who, meanwhile, records a rejection of the candidate and moves the alias without changing the
    champion (an event back to the same version)."""

    def __init__(self, reg: Registry, other: Registry, candidate: str) -> None:
        self.inner = reg.store.create_exclusive
        self.other, self.candidate, self.fired = other, candidate, False

    def __call__(self, rel: str, data: bytes) -> bool:
        if rel.startswith("aliases/") and not self.fired:
            self.fired = True
            self.other.record_rejection(self.candidate, "saves dropped in the canary", run_id=None)
            seq, current = self.other.alias.head()
            event = AliasEvent(
                seq=seq + 1,
                alias="champion",
                from_version=current,
                to_version=str(current),
                action="promote",
                when="2026-01-01T00:00:00+00:00",
                run_id="concurrent",
                reason="re-promoted",
                who="someone",
                forced=True,
            )
            assert self.other.store.create_exclusive(rel, json.dumps(event.to_dict()).encode())
            return self.inner(rel, data)  # the seq is taken now: False
        return self.inner(rel, data)


def test_promote_rereads_the_verdict_after_losing_a_race(
    tmp_path: Path, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "reg")
    reg = Registry(root)
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    v2 = reg.register(make_run())
    reg.record_verdict(v2, Verdict(decision="pass", champion_version=v1))
    race = _RaceOnce(reg, Registry(root), v2)
    monkeypatch.setattr(reg.store, "create_exclusive", race)
    with pytest.raises(RegistryError, match="refusing to promote v0002: it was rejected"):
        reg.promote(v2, reason="blessed")
    assert race.fired and reg.champion() == v1
    assert [e.to_version for e in reg.history()] == [v1, v1]


def test_orphan_temps_under_aliases_are_cleaned_by_age_only(tmp_path: Path, make_run: RunFactory) -> None:
    root = tmp_path / "reg"
    reg = Registry(str(root))
    v1 = reg.register(make_run())
    folder = root / "aliases" / "champion"
    folder.mkdir(parents=True)
    old = folder / ".00000001.json.k3j2h1.tmp"  # a promoter killed between mkstemp and unlink
    young = folder / ".00000001.json.a8d7f6.tmp"  # a live promoter's, mid-write
    other = folder / "notes.txt"
    for path in (old, young, other):
        path.write_text("{")
    an_hour_ago = time.time() - 3700
    os.utime(old, (an_hour_ago, an_hour_ago))
    os.utime(other, (an_hour_ago, an_hour_ago))
    reg.promote(v1, reason="first", force=True)
    assert not old.exists()
    assert young.exists() and other.exists()
    assert reg.champion() == v1


def test_models_list_does_not_bless_a_verdict_against_an_older_champion(
    tmp_path: Path, make_run: RunFactory
) -> None:
    reg = Registry(str(tmp_path / "reg"))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    v2, v3 = reg.register(make_run()), reg.register(make_run())
    reg.record_verdict(v2, Verdict(decision="pass", champion_version=v1))
    reg.record_verdict(v3, Verdict(decision="pass", champion_version=v1))
    assert reg.status(v3, reg.champion()) == "promotable"
    reg.promote(v2, reason="second")
    # v3 passed against v1; the champion is v2 now: promote would refuse it, so not "promotable"
    assert reg.status(v3, reg.champion()) == "needs-regate"
    with pytest.raises(RegistryError, match="run the gate again"):
        reg.promote(v3, reason="third")
    reg.rollback(reason="back")  # champion v1 again: the verdict is current once more
    assert reg.status(v3, reg.champion()) == "promotable"
