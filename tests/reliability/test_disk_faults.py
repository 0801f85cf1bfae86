"""Read-only and full filesystems (a real tmpfs) under the registry: every command that writes
fails with one line naming the path and exit 2, and nothing already there is harmed."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from faults import Tmpfs
from registry_fixtures import RunFactory

from ranking.cli.main import as_user_error, main
from ranking.registry import Registry
from ranking.registry.records import Verdict


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def ro_registry(tmpfs: Tmpfs, make_run: RunFactory) -> tuple[Registry, Path]:
    """v0001 -> v0002 champions, v0003 blessed against v0002; then the mount goes read-only."""
    root = tmpfs.path / "registry"
    reg = Registry(str(root))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    v2 = reg.register(make_run())
    reg.record_verdict(v2, Verdict(decision="pass", champion_version=v1))
    reg.promote(v2, reason="second")
    v3 = reg.register(make_run())
    reg.record_verdict(v3, Verdict(decision="pass", champion_version=v2))
    tmpfs.read_only()
    return reg, root


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["promote", "v0003", "--reason", "better"], "aliases/champion/00000003.json"),
        (["rollback", "--reason", "bad day"], "aliases/champion/00000003.json"),
        (["reject", "v0003", "--reason", "no"], "verdicts/v0003.json"),
    ],
)
def test_a_read_only_registry_is_one_line_naming_the_path(
    ro_registry: tuple[Registry, Path],
    argv: list[str],
    where: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    reg, root = ro_registry
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    home = str(tmp_path / "home")
    code = main([*argv, "--home", home, "--registry", str(root), "--json"])
    captured = capsys.readouterr()
    assert code == 2, captured
    line = _one_line(captured.err)
    assert "read-only file system (EROFS)" in line and str(root / where) in line, line
    assert json.loads(captured.out)["error"].startswith("read-only file system (EROFS)")
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert reg.champion() == "v0002"


def test_the_gate_on_a_read_only_registry_is_one_line(
    tmpfs: Tmpfs, make_run: RunFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmpfs.path / "registry"
    v1 = Registry(str(root)).register(make_run())  # no champion: the gate scores nothing else
    tmpfs.read_only()
    code = main(["gate", "--candidate", v1, "--home", str(tmp_path / "home"), "--registry", str(root)])
    assert code == 2
    line = _one_line(capsys.readouterr().err)
    assert f"read-only file system (EROFS): {root / 'verdicts'}" in line, line  # its folder: not creatable


def test_a_full_disk_while_registering_names_the_file_and_harms_nothing(
    tmpfs: Tmpfs, make_run: RunFactory
) -> None:
    root = tmpfs.path / "registry"
    reg = Registry(str(root))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    run = make_run(payload=b"w" * (8 << 20))  # 8 MiB of weights: cannot fit once the disk is full
    tmpfs.fill()
    with pytest.raises(OSError) as exc:
        reg.register(run)
    assert exc.value.errno == errno.ENOSPC
    assert str(exc.value.filename).startswith(str(root / "versions")), exc.value.filename
    assert ".tmp" not in Path(str(exc.value.filename)).name  # the file meant, not a temp name
    user = as_user_error(exc.value)
    assert user is not None and str(user).startswith("no space left on device (ENOSPC): ")
    # the half-written version is incomplete, never servable; the champion is untouched
    assert reg.champion() == v1
    assert [v for v in reg.version_ids() if reg.is_complete(v)] == [v1]
    for filler in tmpfs.path.glob(".filler*"):
        filler.unlink()
    v3 = reg.register(run)
    reg.verify(v3)


def test_oserror_mapping_is_for_the_environment_only() -> None:
    for code in (
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.ENOTDIR,
        errno.EISDIR,
    ):
        mapped = as_user_error(OSError(code, "x", "/some/path"))
        assert mapped is not None and mapped.exit_code == 2 and "/some/path" in str(mapped)
    for code in (errno.EIO, errno.ENOENT, errno.EBADF):
        assert as_user_error(OSError(code, "x", "/some/path")) is None
    assert as_user_error(RuntimeError("bug")) is None


@pytest.mark.slow
def test_a_full_disk_during_an_epoch_checkpoint_names_the_checkpoint(
    tmpfs: Tmpfs, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, item 13: the disk fills while epoch 2 is checkpointed. The one line says so (the
    checkpoint's path), not only that the run's last summary could not be written after it."""
    import datetime as dt

    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace
    from ranking.trainer.checkpointing import state

    home = tmpfs.path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    real_save = state.save_epoch

    def save_on_a_full_disk(path: Path, *args: object, **kwargs: object) -> object:
        if path.name == "epoch-2":
            tmpfs.fill()
        return real_save(path, *args, **kwargs)

    monkeypatch.setattr(state, "save_epoch", save_on_a_full_disk)
    argv = [
        "run",
        "--end",
        "2026-01-06",
        "--days",
        "4",
        "--epochs",
        "2",
        "--home",
        str(home),
        "--run-id",
        "R",
    ]
    capsys.readouterr()
    assert main(argv) == 2
    # (the trainer's progress events are JSON lines on stderr too)
    line = _one_line("\n".join(x for x in capsys.readouterr().err.splitlines() if not x.startswith("{")))
    assert line.startswith("ranker run: error: step train failed: no space left on device (ENOSPC): ")
    assert str(home / "runs" / "R" / "checkpoints" / "epoch-2") in line, line
