"""The model export on a full disk (issue 25.1): its scratch tensors were sparse memory-mapped
files, so a full filesystem killed the process with SIGBUS (exit 135, no message, the scratch
folder and the full disk left behind). Now: ENOSPC naming the export, and nothing left."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from faults import Tmpfs

from ranking.trainer.checkpointing import state as state
from ranking.trainer.checkpointing.state import export_checkpoint

REPO = Path(__file__).resolve().parents[2]


def write_epoch_checkpoint(path: Path, floats: int) -> None:
    """A one-process folder checkpoint (the layout `save_epoch` writes) of ``floats`` float32s."""
    generator = torch.Generator().manual_seed(0)
    tensors = {
        "model.table": torch.rand(floats, generator=generator),
        "model.dense.weight": torch.rand(4, 3, generator=generator),
        "dense_optimizer.0.exp_avg": torch.rand(4, 3, generator=generator),
    }
    dcp.save(tensors, storage_writer=dcp.FileSystemWriter(str(path)), no_dist=True)
    (path / state.META_FILE).write_text(json.dumps({"epoch": 1, "dense_param_groups": [{"lr": 0.1}]}))


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


EXPORT = """
import sys
from pathlib import Path
from ranking.trainer.checkpointing.state import export_checkpoint
try:
    export_checkpoint(Path(sys.argv[1]), Path(sys.argv[2]))
except OSError as exc:
    print(exc.errno, exc.filename)
    sys.exit(3)
"""


def test_an_export_larger_than_the_free_space_is_enospc_not_sigbus(tmpfs: Tmpfs, tmp_path: Path) -> None:
    src = tmp_path / "epoch-1"
    write_epoch_checkpoint(src, floats=20 << 20)  # 80 MiB of table: more than the 64 MiB tmpfs
    out = tmpfs.path / "run" / "model.pt"
    out.parent.mkdir()
    free = _free_bytes(tmpfs.path)
    proc = subprocess.run(
        [sys.executable, "-c", EXPORT, str(src), str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
        timeout=300,
    )
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == [str(errno.ENOSPC), str(out)]
    assert sorted(p.name for p in out.parent.iterdir()) == []  # no scratch, no temp, no model.pt
    assert _free_bytes(tmpfs.path) == free


def test_a_full_disk_while_writing_the_export_file_cleans_its_scratch(
    tmpfs: Tmpfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scratch fits (allocated up front), the export file does not: the free-space check
    is skipped to reach the write itself."""
    src = tmp_path / "epoch-1"
    write_epoch_checkpoint(src, floats=10 << 20)  # 40 MiB: the scratch fits, a second copy does not
    out = tmpfs.path / "run" / "model.pt"
    out.parent.mkdir()
    free = _free_bytes(tmpfs.path)
    monkeypatch.setattr(state, "_check_free_space", lambda *args: None)
    with pytest.raises(OSError) as exc:
        export_checkpoint(src, out)
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(out)
    assert sorted(p.name for p in out.parent.iterdir()) == []
    assert _free_bytes(tmpfs.path) == free


def test_no_room_for_the_scratch_tensors_is_enospc_naming_the_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a tmpfs: the allocation of the scratch files fails as on a full disk."""
    src = tmp_path / "epoch-1"
    write_epoch_checkpoint(src, floats=1000)
    out = tmp_path / "run" / "model.pt"
    allocated: list[int] = []

    def full(fd: int, offset: int, length: int) -> None:
        allocated.append(length)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError) as exc:
        export_checkpoint(src, out)
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(out)
    assert allocated == [4000]  # the first scratch tensor, allocated before it is mapped
    assert sorted(p.name for p in out.parent.iterdir()) == []


def test_too_little_free_space_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "epoch-1"
    write_epoch_checkpoint(src, floats=1000)
    out = tmp_path / "run" / "model.pt"
    real_statvfs = os.statvfs

    class Nearly:
        def __init__(self, st: os.statvfs_result) -> None:
            self.f_frsize, self.f_bavail = 1, 4000  # the table's bytes once, not twice

    monkeypatch.setattr(os, "statvfs", lambda path: Nearly(real_statvfs(path)))
    with pytest.raises(OSError) as exc:
        export_checkpoint(src, out)
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(out)
    assert sorted(p.name for p in out.parent.iterdir()) == []


def test_the_export_holds_its_scratch_lock_and_leaves_no_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ranking.registry.janitor import EXPORT_SCRATCH_PREFIX, workspace_leftovers

    src = tmp_path / "epoch-1"
    write_epoch_checkpoint(src, floats=1000)
    out = tmp_path / "runs" / "day-1" / "model.pt"  # a run folder of the workspace at tmp_path
    seen: list[list[tuple[str, bool]]] = []
    real_save = state.save_checkpoint

    def save_and_look(path: Path, payload: dict[str, object]) -> str:
        seen.append(
            [
                (Path(x.where).name[: len(EXPORT_SCRATCH_PREFIX)], x.held)
                for x in workspace_leftovers(tmp_path)
            ]
        )
        return real_save(path, payload)

    monkeypatch.setattr(state, "save_checkpoint", save_and_look)
    export_checkpoint(src, out)
    assert seen == [[(EXPORT_SCRATCH_PREFIX, True)]]  # during the export: its scratch, held
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.pt", "model.pt.sha256"]
    exported = torch.load(out, weights_only=True)
    assert torch.equal(
        exported["model"]["table"], torch.rand(1000, generator=torch.Generator().manual_seed(0))
    )
