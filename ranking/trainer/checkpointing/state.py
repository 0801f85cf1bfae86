"""Training state on disk: sharded epoch checkpoints (torch.distributed.checkpoint) and the
consolidated export a registry version keeps.

Epoch checkpoint ``checkpoints/epoch-N/`` (a folder), written by every rank at once:

    .metadata, __<rank>_<i>.distcp   DCP: each rank writes its own shards, nothing is gathered
    meta.json                        plain values: epoch, per-epoch stats, model/train config,
                                     window id, feature version, dense param groups, world size
    ../epoch-N.sha256                written last by rank 0: the sha256 of every file above

The DCP state is one flat dict:

    model.<RankerModel key>                 tables: ShardedTensor [rows, dim]; dense: replicated
    table_optimizer.<param>::<state>        fused table optimizer (row-wise Adagrad momentum1 [rows];
                                            column-wise: [rows x column blocks], block by block)
    dense_optimizer.<param index>.<state>   the dense optimizer's tensors

Keys and global shapes do not depend on the world size (column-wise: as long as it is the only
sharding type, which keeps every table's column blocks), so DCP reshards on load: a checkpoint
written by 2 ranks resumes on 1 and the reverse.

The export (``model.pt``, :func:`export_checkpoint`) is one ``torch.save`` file that every reader
loads through ``ranking.trainer.checkpointing.checkpoint.load_checkpoint`` (``weights_only=True``), format 3:
``{"format": 3, "model": {key: tensor}, "table_optimizer": {key: tensor}, "sparse": {"model" |
"table_optimizer": {key: {"shape", "rows", "values", "init", "sha256"}}}, "dense_optimizer":
{"state", "param_groups"}, "model_config", "train_config", "table_init", "epoch", "epochs",
"window_id", "feature_version", "world_size", ...}``. A table whose rows are mostly still their
initial value (a hashed table's capacity is set by the config, not the data) sits in ``sparse``:
only the rows that differ bitwise from the init of ``table_init``'s seed, with their indices;
the table optimizer's state likewise against zeros (ranking.trainer.checkpointing.compact). ``load_checkpoint``
rebuilds them, checks each against the sha256 taken of the dense tensor here, and hands every
reader the dense ``model`` / ``table_optimizer`` as before; format 2 (every tensor dense, no
``sparse``) still loads as it is. The export is written by one process reading the epoch
checkpoint into file-backed (mmap) tensors and comparing them with the init one block of rows at
a time, so the process's memory never holds the model: pages stream from the shard files to the
export (only the differing rows are copied). Those files are allocated before they are mapped and
the free space (scratch + the dense size of the export) is checked first, so a full disk is an
ENOSPC naming the export, never a SIGBUS.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import pickle
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from ranking.core.atomic import atomic_write_json, atomic_write_text
from ranking.core.hashing import sha256_file
from ranking.registry.janitor import EXPORT_LOCK_FILE, EXPORT_SCRATCH_PREFIX
from ranking.trainer.checkpointing.checkpoint import CheckpointError, checksum_path, save_checkpoint
from ranking.trainer.checkpointing.compact import compact_state
from ranking.trainer.checkpointing.records import (
    CheckpointMeta,
    CheckpointPayload,
    OptimizerStateDict,
    StateDict,
)

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

MODEL = "model."
TABLE_OPT = "table_optimizer."
DENSE_OPT = "dense_optimizer."
META_FILE = "meta.json"


# ---------------------------------------------------------------- DCP metadata, safely

_SAFE_MODULES = {
    "torch.distributed.checkpoint.metadata",
}
_SAFE_NAMES = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
}


class _MetadataUnpickler(pickle.Unpickler):
    """DCP pickles its ``.metadata``; only its own record types, torch sizes/dtypes/layouts and
    paths may load (the ``weights_only=True`` rule, applied to the one pickle DCP writes)."""

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module in _SAFE_MODULES or (module, name) in _SAFE_NAMES:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise CheckpointError(f"checkpoint metadata refers to {module}.{name}: refusing to load it")


def _reader(path: Path) -> Any:
    from torch.distributed.checkpoint import FileSystemReader

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            from torch.distributed.checkpoint.metadata import StorageMeta

            with open(Path(self.path) / ".metadata", "rb") as f:
                metadata = _MetadataUnpickler(io.BytesIO(f.read())).load()
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(str(path))


def tensor_specs(path: Path) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """{key: (global shape, dtype)} of every tensor in a DCP checkpoint."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    try:
        metadata = _reader(path).read_metadata()
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata ({type(exc).__name__})") from None
    out: dict[str, tuple[tuple[int, ...], Any]] = {}
    for key, md in metadata.state_dict_metadata.items():
        if not isinstance(md, TensorStorageMetadata):
            raise CheckpointError(f"checkpoint {path}: {key} is not a tensor")
        out[key] = (tuple(md.size), md.properties.dtype)
    return out


# ---------------------------------------------------------------- the live state


def table_optimizer_state(dmp: Any) -> StateDict:
    from ranking.trainer.distributed import setup as distributed

    return distributed.table_optimizer_state(dmp)


def live_state(dmp: Any, optimizer: Any | None = None) -> StateDict:
    """The flat DCP state of a DMP(TrainTask) and its dense optimizer (views, not copies)."""
    state: StateDict = dict(dmp.state_dict())  # keys are already "model." + the RankerModel's
    state.update({TABLE_OPT + k: v for k, v in table_optimizer_state(dmp).items()})
    if optimizer is not None:
        for index, values in optimizer.state_dict()["state"].items():
            for name, value in values.items():
                state[f"{DENSE_OPT}{index}.{name}"] = value
    return state


def _dense_optimizer(flat: StateDict, param_groups: list[JsonValue]) -> OptimizerStateDict:
    state: dict[int, StateDict] = {}
    for key, value in flat.items():
        index, name = key[len(DENSE_OPT) :].split(".", 1)
        state.setdefault(int(index), {})[name] = value
    return {"state": dict(sorted(state.items())), "param_groups": param_groups}


# ---------------------------------------------------------------- epoch checkpoints


def _rank_and_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _first_failure(exc: Any) -> str:
    """One line for DCP's CheckpointException (a BaseException carrying each rank's error)."""
    for rank, (error, _) in sorted(exc.failures.items()):
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"rank {rank}: {type(error).__name__}: {first}"
    return "unknown failure"


def _write_error(path: Path, exc: Any) -> BaseException:
    """DCP writes through torch.save's zip writer, which reports a full disk as an opaque
    RuntimeError: name it as the OSError it is (the CLI's one-line ENOSPC report)."""
    for error, _ in exc.failures.values():
        if isinstance(error, OSError):
            if error.filename is None:  # a shard's write names no file: the checkpoint it was for
                error.filename = str(path)
            return error
    try:
        st = os.statvfs(path)
        full = st.f_bavail * st.f_frsize < 1 << 20
    except OSError:
        full = False
    if full:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return CheckpointError(f"writing checkpoint {path} failed: {_first_failure(exc)}")


def save_epoch(path: Path, dmp: Any, optimizer: Any, meta: CheckpointMeta) -> None:
    """Every rank writes its shards of the training state to the folder ``path``; rank 0 then
    writes ``meta.json`` and the checksum sidecar that marks the checkpoint complete. Collective."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    rank, world = _rank_and_world()
    side = checksum_path(path)
    if rank == 0:  # a folder left by a killed attempt at this epoch
        side.unlink(missing_ok=True)
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
    if world > 1:
        dist.barrier()
    try:
        dcp.save(live_state(dmp, optimizer), storage_writer=dcp.FileSystemWriter(str(path)))
    except dcp.api.CheckpointException as exc:
        raise _write_error(path, exc) from None
    mine = {p.name: sha256_file(p) for p in sorted(path.glob(f"__{rank}_*"))}
    parts: list[Any] = [mine]
    if world > 1:
        parts = [None] * world if rank == 0 else []
        dist.gather_object(mine, parts if rank == 0 else None, dst=0)  # file digests only
    if rank == 0:
        param_groups = optimizer.state_dict()["param_groups"]
        written: CheckpointMeta = {**meta, "dense_param_groups": param_groups, "world_size": world}
        atomic_write_json(path / META_FILE, written)
        digests: dict[str, str] = {}
        for part in parts:
            digests.update(part)
        for name in (".metadata", META_FILE):
            digests[name] = sha256_file(path / name)
        atomic_write_text(side, "".join(f"{d}  {n}\n" for n, d in sorted(digests.items())))
    if world > 1:
        dist.barrier()


def read_meta(path: Path) -> CheckpointMeta:
    try:
        meta: CheckpointMeta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: unreadable {META_FILE} ({type(exc).__name__})") from None
    return meta


def restore_epoch(path: Path, dmp: Any, optimizer: Any) -> CheckpointMeta:
    """Load a folder checkpoint into the live (sharded) model, table optimizer and dense
    optimizer, whatever world size wrote it (DCP reads the overlapping parts of each shard).
    Returns its meta. Collective."""
    import torch
    import torch.distributed.checkpoint as dcp

    meta = read_meta(path)
    specs = tensor_specs(path)
    targets = live_state(dmp)
    missing = sorted(set(targets) - set(specs))
    if missing:
        raise CheckpointError(f"checkpoint {path} does not fit this model: lacks {missing[:5]}")
    for key, (shape, _) in specs.items():
        if key in targets and tuple(targets[key].size()) != shape:
            hint = (
                " (a column-wise table's optimizer state is [rows x column blocks]: resume with the"
                " sharding types that wrote it)"
                if key.startswith(TABLE_OPT)
                else ""
            )
            raise CheckpointError(
                f"checkpoint {path}: {key} has shape {shape}, the model {tuple(targets[key].size())}{hint}"
            )
    dense = {
        k: torch.zeros(shape, dtype=dtype) for k, (shape, dtype) in specs.items() if k.startswith(DENSE_OPT)
    }
    try:
        dcp.load({**targets, **dense}, storage_reader=_reader(path))
    except dcp.api.CheckpointException as exc:
        raise CheckpointError(f"cannot load checkpoint {path}: {_first_failure(exc)}") from None
    optimizer.load_state_dict(_dense_optimizer(dense, meta["dense_param_groups"]))
    return meta


# ---------------------------------------------------------------- the consolidated export


def _numel(shape: tuple[int, ...]) -> int:
    numel = 1
    for n in shape:
        numel *= n
    return numel


def _nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    import torch

    return _numel(shape) * torch.empty((), dtype=dtype).element_size()


def _mapped(folder: Path, index: int, shape: tuple[int, ...], dtype: Any) -> torch.Tensor:
    """A zeroed tensor backed by a file under ``folder`` (pages live in the page cache).

    The file's blocks are allocated before it is mapped (posix_fallocate): a sparse file's pages
    are allocated when first written through the mapping, and on a full filesystem that write
    is a SIGBUS, which kills the process with no message and no cleanup. Allocated first, a full
    disk is an ENOSPC here, naming the export."""
    import torch

    nbytes = _nbytes(shape, dtype)
    if nbytes == 0:
        return torch.zeros(shape, dtype=dtype)
    path = folder / f"{index}.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, nbytes)
    finally:
        os.close(fd)
    return torch.from_file(str(path), shared=True, size=_numel(shape), dtype=dtype).view(shape)


def _check_free_space(folder: Path, need: int, target: Path) -> None:
    """ENOSPC naming ``target`` when ``folder``'s filesystem has less than ``need`` bytes free
    (before anything is written: the export needs its scratch copy and the file itself)."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    if free < need:
        log.error(
            "exporting %s needs about %.1f MiB on its filesystem (scratch + export), %.1f MiB are free",
            target,
            need / 2**20,
            free / 2**20,
        )
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))


def _scratch_folder(parent: Path, target: Path) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=EXPORT_SCRATCH_PREFIX, dir=parent))
    except OSError as exc:
        exc.filename = str(target)
        raise


def _os_error_behind(exc: RuntimeError, target: Path) -> BaseException:
    """torch.save's zip writer, closing after a failed write (ENOSPC), raises its own
    RuntimeError ("unexpected pos") over the OSError: the OSError, naming ``target``, is the
    error (the CLI's one line); a RuntimeError with no OSError behind it stays what it is."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError):
            cause.filename = str(target)
            return cause
        cause = cause.__cause__ or cause.__context__
    return exc


def _release_frames(exc: BaseException) -> None:
    """Clear the locals of the frames an exception (and what it chains) keeps: a failed export's
    file-backed tensors would otherwise keep their disk space allocated, the scratch folder
    removed but its files still mapped, for as long as the exception is held."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        pending += [error.__cause__, error.__context__]


def _export_through(scratch: Path, src: Path, out: Path, extra: CheckpointMeta | None) -> str:
    """The export itself, its tensors mapped onto files in ``scratch`` (they live in this
    frame only, so nothing maps the scratch once it returns or its exception's frames are cleared)."""
    import torch.distributed.checkpoint as dcp

    meta = read_meta(src)
    try:
        flat = {
            key: _mapped(scratch, i, shape, dtype)
            for i, (key, (shape, dtype)) in enumerate(tensor_specs(src).items())
        }
    except OSError as exc:  # ENOSPC, EDQUOT: the export is what could not be written
        exc.filename = str(out)
        raise
    try:
        dcp.load(flat, storage_reader=_reader(src), no_dist=True)
    except dcp.api.CheckpointException as exc:
        raise CheckpointError(f"cannot export checkpoint {src}: {_first_failure(exc)}") from None
    info = meta.copy()
    info.pop("dense_param_groups", None)
    info.update(extra or {})
    dense, sparse = compact_state(
        {
            "model": {k[len(MODEL) :]: v for k, v in sorted(flat.items()) if k.startswith(MODEL)},
            "table_optimizer": {
                k[len(TABLE_OPT) :]: v for k, v in sorted(flat.items()) if k.startswith(TABLE_OPT)
            },
        },
        info,
    )
    payload: CheckpointPayload = {
        "model": dense["model"],
        "table_optimizer": dense["table_optimizer"],
        "dense_optimizer": _dense_optimizer(
            {k: v for k, v in flat.items() if k.startswith(DENSE_OPT)}, meta.get("dense_param_groups", [])
        ),
        **info,
        "sparse": sparse,
    }
    try:
        return save_checkpoint(out, payload)
    except RuntimeError as exc:
        raise _os_error_behind(exc, out) from None


def export_checkpoint(src: Path, out: Path, extra: CheckpointMeta | None = None) -> str:
    """Write the consolidated ``model.pt`` of the folder checkpoint ``src`` (format above) in one
    process, without holding the model in memory. Returns its sha256.

    The free space (scratch + export) is checked before anything is written. The scratch folder
    (``.export-*`` beside ``out``) is removed however the export ends, and is locked while it is
    in use so that ``ranker gc`` never removes a live export's."""
    from filelock import FileLock

    specs = tensor_specs(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    tensor_bytes = sum(_nbytes(shape, dtype) for shape, dtype in specs.values())
    _check_free_space(out.parent, 2 * tensor_bytes, out)
    scratch = _scratch_folder(out.parent, out)
    lock = FileLock(scratch / EXPORT_LOCK_FILE)
    try:
        lock.acquire()
        return _export_through(scratch, src, out, extra)
    except BaseException as exc:
        _release_frames(exc)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        lock.release()


def local_unsharded(state: StateDict) -> StateDict:
    """Plain tensors of a state whose shards are all local (one process): tests and tools on a
    single rank. Raises when a shard lives elsewhere, so it never stands in for a gather."""
    import torch

    out: StateDict = {}
    for key, value in state.items():
        if not hasattr(value, "local_shards"):
            out[key] = value.detach().clone()
            continue
        full = (
            torch.zeros(tuple(value.size()), dtype=value.local_shards()[0].tensor.dtype)
            if value.local_shards()
            else None
        )
        covered = torch.zeros(tuple(value.size()), dtype=torch.bool)
        for shard in value.local_shards():
            index = tuple(
                slice(o, o + n)
                for o, n in zip(shard.metadata.shard_offsets, shard.metadata.shard_sizes, strict=True)
            )
            assert full is not None
            full[index] = shard.tensor.detach().cpu()
            covered[index] = True
        if full is None or not bool(covered.all()):
            raise CheckpointError(f"{key}: not every shard is local to this process")
        out[key] = full
    return out
