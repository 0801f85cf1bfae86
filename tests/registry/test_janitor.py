"""`ranker gc`: what killed writers left goes once it is stale; nothing a live process holds does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock
from registry_fixtures import RunFactory

from ranking.cli.main import main
from ranking.registry import Registry
from ranking.registry.janitor import (
    EXPORT_LOCK_FILE,
    EXPORT_SCRATCH_PREFIX,
    INCOMPLETE_VERSION,
    TEMP,
    Leftover,
    collect_garbage,
    keep_reason,
)

HOUR = 3600.0


def test_keep_reason_keeps_held_and_young_leftovers_only() -> None:
    now = 1_000_000.0
    old = Leftover(TEMP, "/x", now - 2 * HOUR, 10)
    assert keep_reason(old, now, HOUR) is None
    assert (
        keep_reason(Leftover(TEMP, "/x", now - 2 * HOUR, 10, held=True), now, HOUR)
        == "held by a live process"
    )
    young = keep_reason(Leftover(TEMP, "/x", now - 60, 10), now, HOUR)
    assert young is not None and "within the 3600 s grace period" in young
    assert keep_reason(Leftover(TEMP, "/x", now - 60, 10), now, 0.0) is None


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    for sub in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(sub, (then, then), follow_symlinks=False)


def _killed_export(run: Path, name: str) -> Path:
    scratch = run / f"{EXPORT_SCRATCH_PREFIX}{name}"
    scratch.mkdir(parents=True)
    (scratch / "0.bin").write_bytes(b"\0" * 4096)
    return scratch


def test_gc_removes_stale_temp_and_scratch_and_keeps_young_or_held(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = home / "runs" / "r1"
    stale_scratch = _killed_export(run, "dead")
    live_scratch = _killed_export(run, "live")
    young_scratch = _killed_export(run, "young")
    stale_dir = home / "windows" / "days" / "2026-01-02" / ".abc.x1y2.tmp"
    stale_dir.mkdir(parents=True)
    (stale_dir / "examples.parquet").write_bytes(b"p" * 100)
    stale_file = home / "metrics" / ".ranker.prom.q9.tmp"
    stale_file.parent.mkdir(parents=True)
    stale_file.write_bytes(b"m")
    not_ours = home / "notes" / ".draft.k3.tmp"  # a folder that is not the workspace's
    not_ours.parent.mkdir(parents=True)
    kept_files = [
        home / "metrics" / "ranker.prom",
        run / "model.pt",
        home / "windows" / "days" / "x.tmp",
        not_ours,
    ]
    for path in kept_files:
        path.write_bytes(b"keep")
    for path in (stale_scratch, live_scratch, stale_dir, stale_file, *kept_files):
        _age(path, 2 * HOUR)
    # a temp folder whose old files have one recent write: its writer is alive
    busy_dir = home / "cache" / "registry" / ".v0001.zz.tmp"
    busy_dir.mkdir(parents=True)
    (busy_dir / "model.pt").write_bytes(b"old")
    _age(busy_dir, 2 * HOUR)
    (busy_dir / "eval.json").write_bytes(b"new")

    with FileLock(live_scratch / EXPORT_LOCK_FILE):  # a live export holds its scratch
        _age(live_scratch, 2 * HOUR)
        report = collect_garbage(home, None, grace_seconds=HOUR)
    removed = {r["where"] for r in report.removed}
    kept = {r["where"]: r["why"] for r in report.kept}
    assert removed == {str(stale_scratch), str(stale_dir), str(stale_file)}
    assert kept == {
        str(live_scratch): "held by a live process",
        str(young_scratch): kept[str(young_scratch)],
        str(busy_dir): kept[str(busy_dir)],
    }
    assert "grace period" in kept[str(young_scratch)] and "grace period" in kept[str(busy_dir)]
    assert not stale_scratch.exists() and not stale_dir.exists() and not stale_file.exists()
    assert live_scratch.is_dir() and young_scratch.is_dir() and busy_dir.is_dir()
    assert all(path.read_bytes() == b"keep" for path in kept_files)
    assert report.bytes_freed == 4096 + 100 + 1
    # the live export finished: its scratch is an orphan now
    assert {r["where"] for r in collect_garbage(home, None, grace_seconds=HOUR).removed} == {
        str(live_scratch)
    }


def _incomplete(reg: Registry, run: Path, claim: dict[str, object]) -> str:
    """A registration that copied its files and died before version.json."""
    version = reg.register(run)
    folder = Path(reg.store.path(f"versions/{version}"))
    (folder / "version.json").unlink()
    (folder / "claim.json").write_text(json.dumps(claim))
    return version


def test_gc_empties_incomplete_versions_of_dead_writers_and_keeps_their_claims(
    tmp_path: Path, make_run: RunFactory
) -> None:
    import socket

    reg = Registry(str(tmp_path / "registry"))
    complete = reg.register(make_run())
    host = socket.gethostname()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    long_ago = "2020-01-01T00:00:00+00:00"
    orphan = _incomplete(reg, make_run(), {"claimed_at": long_ago, "host": host, "pid": dead_pid})
    live = _incomplete(reg, make_run(), {"claimed_at": long_ago, "host": host, "pid": os.getpid()})
    elsewhere = _incomplete(
        reg, make_run(), {"claimed_at": long_ago, "host": "another-host", "pid": os.getpid()}
    )
    for version in (orphan, live, elsewhere):
        _age(Path(reg.store.path(f"versions/{version}")), 2 * HOUR)
    young = _incomplete(reg, make_run(), {"claimed_at": long_ago, "host": host, "pid": dead_pid})

    report = collect_garbage(tmp_path / "home", reg, grace_seconds=HOUR)
    assert {r["where"] for r in report.removed} == {f"versions/{orphan}", f"versions/{elsewhere}"}
    kept = {r["where"]: r["why"] for r in report.kept}
    assert set(kept) == {f"versions/{live}", f"versions/{young}"}
    assert kept[f"versions/{live}"] == "held by a live process"
    assert "grace period" in kept[f"versions/{young}"]
    assert all(r["kind"] == INCOMPLETE_VERSION for r in report.removed)
    for version in (orphan, elsewhere):  # emptied, but the id stays taken
        assert sorted(p.name for p in Path(reg.store.path(f"versions/{version}")).iterdir()) == ["claim.json"]
    assert len(list(Path(reg.store.path(f"versions/{live}")).iterdir())) > 1
    assert reg.version_ids() == [complete, orphan, live, elsewhere, young]
    reg.verify(complete)
    assert reg.register(make_run()) == "v0006"  # never an emptied version's id
    # emptied versions are not found again
    assert {r["where"] for r in collect_garbage(tmp_path / "home", reg, grace_seconds=HOUR).removed} == set()


def test_ranker_gc_dry_run_lists_and_removes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    scratch = _killed_export(home / "runs" / "r1", "dead")
    _age(scratch, 2 * HOUR)
    argv = ["gc", "--home", str(home), "--grace-hours", "1", "--json"]
    assert main([*argv, "--dry-run"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [r["where"] for r in summary["removed"]] == [str(scratch)] and summary["dry_run"]
    assert scratch.is_dir()
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["bytes_freed"] == 4096 and not scratch.exists()


@pytest.mark.parametrize("grace", ["-1", "nan", "1e9"])
def test_ranker_gc_refuses_a_bad_grace_period(
    grace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["gc", "--home", str(tmp_path), "--grace-hours", grace])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--grace-hours" in err, err


def test_gc_removes_an_epoch_checkpoint_whose_save_died_and_keeps_complete_or_held_ones(
    tmp_path: Path,
) -> None:
    """A full disk during an epoch checkpoint left a partial epoch-2 (no sidecar) that no gc
    removed (issue 32): it goes once stale and unheld; the complete epoch-1 (what --resume uses)
    stays."""
    from ranking.registry.janitor import INCOMPLETE_CHECKPOINT

    home = tmp_path / "home"
    checkpoints = home / "runs" / "r1" / "checkpoints"
    for epoch in (1, 2):
        (checkpoints / f"epoch-{epoch}").mkdir(parents=True)
        (checkpoints / f"epoch-{epoch}" / "__0_0.distcp").write_bytes(b"\0" * 2048)
    (checkpoints / "epoch-1.sha256").write_text("0" * 64 + "  __0_0.distcp\n")
    _age(home / "runs", 2 * HOUR)
    with FileLock(home / "runs" / ".r1.train.lock"):  # the job is still writing it
        held = collect_garbage(home, None, grace_seconds=HOUR)
    assert held.removed == [] and [r["why"] for r in held.kept] == ["held by a live process"]
    report = collect_garbage(home, None, grace_seconds=HOUR)
    assert [(r["kind"], Path(r["where"]).name) for r in report.removed] == [
        (INCOMPLETE_CHECKPOINT, "epoch-2")
    ]
    assert (checkpoints / "epoch-1").is_dir() and not (checkpoints / "epoch-2").exists()
