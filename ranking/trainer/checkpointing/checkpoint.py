"""Checkpoints and their completeness: a ``.sha256`` sidecar written after the data.

Two kinds. A *file* checkpoint (the run's ``model.pt`` export): atomic ``torch.save`` + sidecar,
loaded with ``weights_only=True`` (memory-mapped), so payloads hold only tensors and plain Python
values; :func:`load_checkpoint` is the one loader every reader goes through, and hands back every
tensor dense whatever the format (format 3's compact tables rebuilt from their recorded init,
ranking.trainer.checkpointing.compact; format 2 as stored). An *epoch* checkpoint: a folder written shard by shard by every rank
(ranking.trainer.checkpointing.state), whose sidecar lists the sha256 of every file in it.

Either is *complete* when the sidecar exists and every digest matches; a crash before the sidecar
leaves an incomplete one that ``--resume`` skips.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ranking.core.atomic import atomic_path, atomic_write_text
from ranking.core.hashing import sha256_file
from ranking.trainer.checkpointing.errors import CheckpointError
from ranking.trainer.checkpointing.records import CheckpointMeta, CheckpointPayload

if TYPE_CHECKING:
    pass


log = logging.getLogger(__name__)

# 2: + dense_optimizer, written from a sharded checkpoint; 3: rows equal to their init stored
# as nothing (ranking.trainer.checkpointing.compact), rebuilt by load_checkpoint
FORMAT_VERSION = 3
_PARTS = ("model", "table_optimizer", "dense_optimizer", "sparse")  # the tensors; the rest is meta
CHECKSUM_SUFFIX = ".sha256"
_EPOCH_DIR = re.compile(r"^epoch-(\d+)$")


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def save_checkpoint(path: Path, payload: CheckpointPayload) -> str:
    """Write ``payload`` atomically, then its checksum; returns the sha256."""
    import torch

    with atomic_path(path) as tmp:
        # through a Python file object: a full disk is then OSError(ENOSPC), which the CLI reports
        # as one line; torch.save(path) reports it as an opaque RuntimeError from its zip writer
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT_VERSION, **payload}, f)
        digest = sha256_file(tmp)
    atomic_write_text(checksum_path(path), f"{digest}  {path.name}\n")
    return digest


def verify_checkpoint(path: Path) -> str:
    """The file's sha256 if it matches its sidecar; CheckpointError otherwise."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    side = checksum_path(path)
    if not side.is_file():
        raise CheckpointError(f"checkpoint {path} has no {CHECKSUM_SUFFIX} file (incomplete write?)")
    recorded = side.read_text(errors="replace")
    expected = recorded.split()[0] if recorded.strip() else ""
    actual = sha256_file(path)
    if actual != expected:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: sha256 {actual[:12]}… != recorded {expected[:12]}…"
        )
    return actual


def _load_file(path: Path, verify: bool) -> CheckpointPayload:
    """The payload as stored (a format-3 file's compact tensors still compact)."""
    import torch

    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if verify and checksum_path(path).is_file():
        verify_checkpoint(path)
    try:
        # mmap: a large export is paged in as it is read, not copied into memory first
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # unpickling errors come in many types
        # torch's own message spans lines and suggests weights_only=False: never for a file
        # that failed the safe load; one line, the detail in the debug log
        log.debug("torch.load(%s) failed: %s", path, exc)
        raise CheckpointError(
            f"cannot load checkpoint {path}: corrupt, or holds more than tensors and plain values"
            f" ({type(exc).__name__})"
        ) from None
    if not isinstance(payload, dict) or "model" not in payload:
        raise CheckpointError(f"{path} is not a ranker checkpoint (no 'model' state)")
    written = payload.get("format")
    if written is not None and (type(written) is not int or written < 1):
        raise CheckpointError(f"{path}: format {written!r} is not a checkpoint format (an integer >= 1)")
    if isinstance(written, int) and written > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} is a format-{written} checkpoint; this ranker reads formats up to {FORMAT_VERSION}"
        )
    return cast(CheckpointPayload, payload)


def load_checkpoint(path: Path, verify: bool = True) -> CheckpointPayload:
    """Load a checkpoint (tensors + plain values only), every tensor dense whatever the format
    (format 3's compact tables are rebuilt from their init, ranking.trainer.checkpointing.compact). With
    ``verify`` a sidecar checksum, when present, must match; a file without a sidecar (e.g.
    copied by hand) still loads."""
    from ranking.trainer.checkpointing.compact import expand

    payload = _load_file(path, verify)
    try:
        return expand(payload)
    except CheckpointError as exc:
        raise CheckpointError(f"cannot load checkpoint {path}: {exc}") from None


def checkpoint_meta(path: Path) -> CheckpointMeta:
    """A checkpoint's plain values (config, seeds, ``table_init``, eval ...) without rebuilding
    its tensors; not checked against its sidecar (for a file already loaded or verified)."""
    return cast(CheckpointMeta, {k: v for k, v in _load_file(path, verify=False).items() if k not in _PARTS})


def epoch_checkpoint_path(run_dir: Path, epoch: int) -> Path:
    """The folder of epoch ``epoch``'s sharded checkpoint."""
    return run_dir / "checkpoints" / f"epoch-{epoch}"


def verify_epoch(path: Path) -> None:
    """CheckpointError unless every file of the folder checkpoint matches its sidecar."""
    side = checksum_path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint not found: {path}")
    if not side.is_file():
        raise CheckpointError(f"checkpoint {path} has no {side.name} file (incomplete write?)")
    listed: dict[str, str] = {}
    for line in side.read_text(errors="replace").splitlines():
        if line.strip():
            fields = line.split(None, 1)
            if len(fields) != 2 or not re.fullmatch(r"[0-9a-f]{64}", fields[0]):
                raise CheckpointError(
                    f"checkpoint {path}: {side.name} has a line that is not '<sha256> <file>'"
                )
            listed[fields[1]] = fields[0]
    on_disk = {p.name for p in path.iterdir() if p.is_file()}
    if not listed or set(listed) != on_disk:
        raise CheckpointError(f"checkpoint {path} is incomplete: its files do not match {side.name}")
    for name, digest in listed.items():
        if sha256_file(path / name) != digest:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} does not match its sha256")


def latest_complete_checkpoint(run_dir: Path) -> tuple[int, Path] | None:
    """The highest epoch whose checkpoint verifies; incomplete or corrupt ones are skipped."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return None
    found = sorted(
        ((int(m.group(1)), p) for p in folder.iterdir() if (m := _EPOCH_DIR.match(p.name))), reverse=True
    )
    for epoch, path in found:
        try:
            verify_epoch(path)
        except CheckpointError as exc:
            log.warning("skipping checkpoint: %s", exc)
            continue
        return epoch, path
    return None
