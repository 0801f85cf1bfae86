"""The compact export (format 3): rows still equal to their initial value are not stored.

A hashed table's capacity is set by the model config (``_DEFAULT_ROWS``: ~700k rows), not by the
data, and a fused row-wise optimizer updates only the rows a batch looked up. On a small
workspace nearly every row of a trained table is still its initial value, bit for bit, and every
untouched row of the table optimizer's state is still 0. Both are regenerated exactly on load: a
table's init from ``ranking.trainer.models.init.table_rows(table, seed, rows)`` (a function of the seed,
table name and shape alone), the optimizer state as zeros.

So the export stores, per tensor that gains from it, only the rows that differ *bitwise* from
that reference, with their indices (``payload["sparse"]``)::

    {"model" | "table_optimizer": {key: {
        "shape": [rows, ...], "rows": int tensor [n], "values": tensor [n, ...],
        "init": {"kind": "table", "table": name, "seed": seed} | {"kind": "zeros"},
        "sha256": digest of the whole dense tensor's bytes}}}

Nothing is assumed: every row not bit-equal to the reference is stored, and the loader checks the
rebuilt tensor against the digest taken from the dense tensor at export time, so a reference that
regenerates differently (another init, another torch RNG) is a ``CheckpointError``, never a
silently different model. A tensor where sparse rows would not be smaller is stored dense.

Which seed a table's untouched rows hold is recorded in the checkpoint meta as ``table_init``
({table: seed}): the run's own seed from scratch, the warm start's own ``table_init`` when the
tables were carried from it (a daily model warm-started from a base keeps the base's untouched
rows), so the reference follows a warm-start chain to the tables' origin. A wrong or missing
seed costs size (every row stored), never exactness.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ranking.trainer.checkpointing.errors import CheckpointError
from ranking.trainer.checkpointing.records import (
    CheckpointMeta,
    CheckpointPayload,
    ReferenceRecord,
    SparseRecord,
    StateDict,
)
from ranking.trainer.models.config import TableConfig
from ranking.trainer.models.init import BLOCK_ROWS, table_rows

if TYPE_CHECKING:
    import torch


SPARSE = "sparse"  # the payload key of the compact tensors
PARTS: tuple[Literal["model"], Literal["table_optimizer"]] = ("model", "table_optimizer")
TABLE_INIT = "table_init"  # meta: {table name: seed of the init its untouched rows hold}
TABLE_KEY_PREFIX = "sparse_arch.embedding_bags."  # RankerModel keys of the tables
TABLE_KEY_SUFFIX = ".weight"
_INDEX_BYTES = 4  # int32 row indices while the rows fit

Reference = Callable[[int, int], "torch.Tensor | None"]  # rows [lo, hi) of the reference; None: zeros


# ---------------------------------------------------------------- the reference


def table_init_seeds(meta: CheckpointMeta) -> dict[str, int]:
    """{table: seed} whose init a checkpoint's untouched table rows hold: its ``table_init``, and
    for a table it does not name (a format-2 file) its own training seed."""
    seeds: dict[str, int] = {}
    train = meta.get("train_config")
    model = meta.get("model_config")
    seed = train.get("seed") if isinstance(train, dict) else None
    if isinstance(seed, int) and isinstance(model, dict):
        seeds = {t["name"]: seed for t in model.get("tables", []) if isinstance(t, dict) and "name" in t}
    recorded = meta.get(TABLE_INIT)
    if isinstance(recorded, dict):
        seeds.update({k: v for k, v in recorded.items() if isinstance(k, str) and type(v) is int})
    return seeds


def _table_config(name: str, shape: tuple[int, ...]) -> TableConfig | None:
    if len(shape) != 2 or not name.isidentifier() or min(shape) <= 0:
        return None
    return TableConfig(name=name, feature=name, num_embeddings=shape[0], embedding_dim=shape[1])


def _table_name(key: str) -> str | None:
    if key.startswith(TABLE_KEY_PREFIX) and key.endswith(TABLE_KEY_SUFFIX):
        return key[len(TABLE_KEY_PREFIX) : -len(TABLE_KEY_SUFFIX)]
    return None


def _init_rows(name: str, seed: int, shape: tuple[int, ...]) -> Reference:
    table = _table_config(name, shape)
    assert table is not None
    return lambda lo, hi: table_rows(table, seed, slice(lo, hi))


# ---------------------------------------------------------------- bits and digests


def _bits(tensor: torch.Tensor) -> torch.Tensor | None:
    """The tensor as integers of its element size (bitwise comparison: -0.0 != 0.0, NaN == NaN
    of the same payload), 2-D [rows, rest]; None for what cannot be viewed so."""
    import torch

    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if tensor.dim() == 0 or tensor.is_complex() or tensor.element_size() not in ints:
        return None
    return tensor.contiguous().view(ints[tensor.element_size()]).reshape(tensor.shape[0], -1)


def _digest_update(digest: Any, bits: torch.Tensor) -> None:
    digest.update(bits.contiguous().numpy().data)


def tensor_sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's bytes in row order (what the export records and the loader checks)."""
    bits = _bits(tensor)
    if bits is None:
        raise CheckpointError(
            f"cannot digest a tensor of dtype {tensor.dtype} and shape {tuple(tensor.shape)}"
        )
    digest = hashlib.sha256()
    for lo in range(0, bits.shape[0], BLOCK_ROWS):
        _digest_update(digest, bits[lo : lo + BLOCK_ROWS])
    return digest.hexdigest()


def changed_rows(tensor: torch.Tensor, reference: Reference) -> tuple[torch.Tensor, str]:
    """(int64 indices of the rows of ``tensor`` that differ bitwise from ``reference``, sha256 of
    ``tensor``), streamed one block of rows at a time: no tensor-sized temporary."""
    import torch

    bits = _bits(tensor)
    assert bits is not None
    digest = hashlib.sha256()
    found: list[torch.Tensor] = []
    for lo in range(0, bits.shape[0], BLOCK_ROWS):
        hi = min(lo + BLOCK_ROWS, bits.shape[0])
        block = bits[lo:hi]
        _digest_update(digest, block)
        ref = reference(lo, hi)
        ref_bits = torch.zeros_like(block) if ref is None else _bits(ref.to(tensor.dtype))
        if ref_bits is None or ref_bits.shape != block.shape:
            raise CheckpointError(f"the reference of rows {lo}:{hi} does not fit shape {tuple(tensor.shape)}")
        found.append(torch.nonzero((block != ref_bits).any(dim=1)).flatten() + lo)
    rows = torch.cat(found) if found else torch.zeros(0, dtype=torch.int64)
    return rows, digest.hexdigest()


# ---------------------------------------------------------------- export side


def _sparse_entry(tensor: torch.Tensor, init: ReferenceRecord, reference: Reference) -> SparseRecord | None:
    """The sparse record of ``tensor`` against ``reference``, or None when dense is smaller."""
    import torch

    if _bits(tensor) is None or tensor.shape[0] == 0:
        return None
    rows, digest = changed_rows(tensor, reference)
    row_bytes = tensor[0].numel() * tensor.element_size()
    index_bytes = _INDEX_BYTES if tensor.shape[0] < 2**31 else 8
    if rows.numel() * (row_bytes + index_bytes) >= tensor.shape[0] * row_bytes:
        return None
    return {
        "shape": list(tensor.shape),
        "rows": rows.to(torch.int32 if index_bytes == 4 else torch.int64),
        "values": tensor.index_select(0, rows),
        "init": init,
        "sha256": digest,
    }


def _reference_of(
    part: str, key: str, tensor: torch.Tensor, seeds: Mapping[str, int]
) -> tuple[ReferenceRecord, Reference] | None:
    """(init record, reference rows) of one tensor of the export, or None: stored dense."""
    import torch

    if part == "table_optimizer":
        return {"kind": "zeros"}, lambda lo, hi: None
    name = _table_name(key)
    if name is None or name not in seeds or tensor.dtype != torch.float32:
        return None
    if _table_config(name, tuple(tensor.shape)) is None:
        return None
    seed = seeds[name]
    return {"kind": "table", "table": name, "seed": seed}, _init_rows(name, seed, tuple(tensor.shape))


def compact_state(
    state: dict[str, StateDict], meta: CheckpointMeta
) -> tuple[dict[str, StateDict], dict[str, dict[str, SparseRecord]]]:
    """Split ``{"model": {...}, "table_optimizer": {...}}`` into what stays dense and the sparse
    records (``payload["sparse"]``): tables against the init of ``table_init_seeds(meta)``, the
    table optimizer's state against zeros."""
    seeds = table_init_seeds(meta)
    dense: dict[str, StateDict] = {}
    sparse: dict[str, dict[str, SparseRecord]] = {}
    for part in PARTS:
        dense[part], sparse[part] = {}, {}
        for key, tensor in state.get(part, {}).items():
            found = _reference_of(part, key, tensor, seeds)
            entry = _sparse_entry(tensor, *found) if found is not None else None
            if entry is None:
                dense[part][key] = tensor
            else:
                sparse[part][key] = entry
    return dense, sparse


# ---------------------------------------------------------------- load side


def _shape_of(key: str, record: Mapping[str, Any]) -> tuple[int, ...]:
    """A loaded sparse record's shape (the record is file content: untrusted until checked here)."""
    shape = record.get("shape")
    if not isinstance(shape, list) or not shape or not all(type(n) is int and n >= 0 for n in shape):
        raise CheckpointError(f"compact tensor {key}: bad shape {shape!r}")
    return tuple(shape)


def _reference_tensor(key: str, init: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    import torch

    kind = init.get("kind") if isinstance(init, dict) else None
    if kind == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if kind == "table":
        name, seed = init.get("table"), init.get("seed")
        table = _table_config(name, shape) if isinstance(name, str) else None
        if table is None or type(seed) is not int or dtype != torch.float32:
            raise CheckpointError(f"compact tensor {key}: bad table init {init!r}")
        return table_rows(table, seed, slice(0, shape[0]))
    raise CheckpointError(f"compact tensor {key}: unknown init {init!r}")


def _rebuild(key: str, record: Any) -> torch.Tensor:
    """The dense tensor of one sparse record: the reference, the stored rows over it, checked
    against the digest the export took of the dense tensor."""
    import torch

    if not isinstance(record, dict):
        raise CheckpointError(f"compact tensor {key}: not a record")
    shape = _shape_of(key, record)
    rows, values = record.get("rows"), record.get("values")
    if not isinstance(rows, torch.Tensor) or not isinstance(values, torch.Tensor) or rows.dim() != 1:
        raise CheckpointError(f"compact tensor {key}: rows and values must be tensors")
    rows = rows.long()
    if tuple(values.shape) != (rows.numel(), *shape[1:]) or (
        rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= shape[0])
    ):
        raise CheckpointError(f"compact tensor {key}: rows/values do not fit shape {shape}")
    dense = _reference_tensor(key, record.get("init"), shape, values.dtype)
    dense[rows] = values
    if tensor_sha256(dense) != record.get("sha256"):
        raise CheckpointError(
            f"compact tensor {key} does not rebuild to what was exported (sha256 mismatch): its"
            " initial values regenerate differently here (another init or torch RNG?)"
        )
    return dense


_UNKNOWN_MODEL_MAX_ELEMENTS = 2**31


def _table_shapes(model_config: Any) -> dict[str, tuple[int, int]]:
    """Each embedding table's (rows, dim) in a checkpoint's model config ({} when it has none)."""
    tables = model_config.get("tables") if isinstance(model_config, dict) else None
    out = {}
    for table in tables if isinstance(tables, list | tuple) else []:
        if isinstance(table, dict) and isinstance(table.get("name"), str):
            rows, dim = table.get("num_embeddings"), table.get("embedding_dim")
            if type(rows) is int and type(dim) is int and rows > 0 and dim > 0:
                out[table["name"]] = (rows, dim)
    return out


def _check_shapes(sparse: Mapping[str, Any], model_config: Any) -> None:  # file content, checked here
    """Every sparse record's shape against the model config, before anything is allocated: a
    record recomputed with a table of 2**36 rows asked for 274 GB before its digest was checked
    (issue 32). A table's weights have its rows; no tensor of a table (its optimizer state,
    sharded column-wise or not) holds more values than the table, nor any record more than the
    largest table."""
    tables = _table_shapes(model_config)
    # without a model config (tables of unknown origin, stored dense): a bound of 8 GiB of float32
    largest = max((rows * dim for rows, dim in tables.values()), default=_UNKNOWN_MODEL_MAX_ELEMENTS)
    for part in PARTS:
        records = sparse.get(part) or {}
        for key, record in records.items() if isinstance(records, dict) else []:
            shape = _shape_of(key, record if isinstance(record, dict) else {})
            name = next((n for n in tables if f".{n}." in key or f"::{n}." in key), None)
            limit = math.prod(tables[name]) if name is not None else largest
            weight_rows = name is not None and part == "model" and shape[0] != tables[name][0]
            if weight_rows or math.prod(shape) > limit:
                raise CheckpointError(
                    f"compact tensor {key}: shape {list(shape)} does not fit the model config's tables"
                    + (f" ({name}: {tables[name][0]} x {tables[name][1]})" if name else "")
                )


def expand(payload: CheckpointPayload) -> CheckpointPayload:
    """The dense payload of a loaded checkpoint: a format-3 file's sparse records rebuilt into
    ``model`` / ``table_optimizer`` (keys sorted, as written); other formats as they are."""
    sparse = payload.pop("sparse", None)
    if sparse is None:
        return payload
    if not isinstance(sparse, dict):
        raise CheckpointError(f"checkpoint {SPARSE!r} is not a mapping")
    _check_shapes(sparse, payload.get("model_config"))
    for part in PARTS:
        records = sparse.get(part) or {}
        if not records:
            continue
        merged = dict(payload.get(part) or {})
        for key, record in records.items():
            if key in merged:
                raise CheckpointError(f"compact tensor {key} is stored both dense and sparse")
            merged[key] = _rebuild(key, record)
        payload[part] = dict(sorted(merged.items()))
    return payload
