"""Streaming the window's example partitions into training and eval batches.

Nothing here loads a window into memory: partitions are read one parquet row group at a time
(in slices), pass through a bounded, seeded shuffle buffer, and leave as batches. Memory is
bounded by the row-group slice + the shuffle buffer, whatever the window length.

Sharding across ranks: the unit of work is one (partition file, row group). Every epoch the units
are permuted with a seed shared by all ranks and dealt greedily to the rank with the fewest rows,
so each rank reads a disjoint set and the row counts stay balanced. All ranks must take the same
number of steps (collectives), so each rank splits its rows into exactly ``steps`` batches; no row
is dropped. Each row is weighted by 1 / rows in the global step so the ranks' losses sum to the
mean over the global batch whatever the split (see ranking.trainer.models.model.TrainTask for the gradients).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from features.schema import HISTORY_FEATURES, LABEL, REQUEST_KEY
from features.window import WindowManifest, WindowPartition
from ranking.core.errors import DataValidationError
from ranking.trainer.models.config import ModelConfig

if TYPE_CHECKING:
    import pyarrow as pa

    from ranking.trainer.models.model import TrainBatch

READ_SLICE_ROWS = 65_536  # rows decoded at a time inside a row group


# ---------------------------------------------------------------- window checks


def required_columns(cfg: ModelConfig, eval_keys: bool = False) -> list[str]:
    cols = [*cfg.sparse_features, *cfg.dense_features, LABEL]
    if eval_keys:
        cols = [REQUEST_KEY, "pin_id", *[c for c in cols if c not in (REQUEST_KEY, "pin_id")]]
    return list(dict.fromkeys(cols))


def unreadable(path: str | Path, exc: BaseException) -> DataValidationError:
    """A partition pyarrow cannot read (truncated, bytes flipped): one line naming the file."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DataValidationError(
        f"partition {path} is unreadable ({first}): rebuild the window (ranker features window),"
        " which replaces partitions that no longer match their record"
    )


def check_partition(part: WindowPartition, columns: Sequence[str], what: str) -> None:
    """The file exists, is the file the manifest recorded (size and sha256, where recorded: a
    partition swapped or altered since its window was built is never trained on), holds the
    needed columns and as many rows as the manifest says."""
    from features.partitions import partition_problem

    if not part.path.is_file():
        raise DataValidationError(f"{what} partition {part.date} missing: {part.path}")
    if part.bytes is not None and part.sha256 is not None:
        problem = partition_problem(
            part.path, {"bytes": part.bytes, "sha256": part.sha256, "rows": part.rows}
        )
        if problem is not None:
            raise DataValidationError(
                f"{what} partition {part.path} is not the one its window recorded ({problem}):"
                " rebuild the window (ranker features window), which replaces it"
            )
    check_parquet(part.path, part.rows, columns, what)


def check_parquet(path: Path, rows: int, columns: Sequence[str], what: str) -> None:
    """The file exists, pyarrow reads it, and it holds ``columns`` and ``rows`` rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DataValidationError(f"{what} partition  missing: {path}")
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(path, exc) from None
    names = set(meta.schema.to_arrow_schema().names)
    missing = [c for c in columns if c not in names]
    history = [c for c in missing if c in HISTORY_FEATURES]
    if history:
        # a window built before the history views existed (issue 34): its partitions hold
        # everything else, so naming all the columns would bury the cause
        raise DataValidationError(
            f"{what} partition {path} lacks the history features ({len(history)} columns, e.g."
            f" {history[0]}) the model reads: the window was built before them; rebuild it"
            " (ranker features window), or train with recipe.history_features = false"
        )
    if missing:
        raise DataValidationError(f"{what} partition {path} lacks columns {missing}")
    if meta.num_rows != rows:
        raise DataValidationError(
            f"{what} partition {path} holds {meta.num_rows} rows but the manifest says {rows}"
        )


def validate_window(
    manifest: WindowManifest, cfg: ModelConfig, expected_feature_version: str | None = None
) -> None:
    """Fail before training on an empty window, missing columns or foreign feature definitions."""
    if expected_feature_version is not None and manifest.feature_version != expected_feature_version:
        raise DataValidationError(
            f"window {manifest.path} was built with feature definitions {manifest.feature_version!r}, "
            f"expected {expected_feature_version!r}: rebuild the window"
        )
    if not manifest.train or manifest.rows_train == 0:
        raise DataValidationError(f"window {manifest.path} has no training rows")
    if manifest.eval.rows == 0:
        raise DataValidationError(f"window {manifest.path} has an empty eval day")
    cols = required_columns(cfg)
    for part in manifest.train:
        check_partition(part, cols, "train")
    check_partition(manifest.eval, required_columns(cfg, eval_keys=True), "eval")


# ---------------------------------------------------------------- encoding (pure)


def hash_ids(values: pa.Array | pa.ChunkedArray, num_embeddings: int) -> np.ndarray:
    """Stable hash of categorical values into [0, num_embeddings): same id -> same row in every
    process and every run; unseen ids land on some row instead of failing. Nulls hash as a value
    of their own."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_integer(values.type):
        raw = pc.fill_null(values.cast(pa.int64()), -(2**62)).to_numpy(zero_copy_only=False)
        hashed = pd.util.hash_array(raw, categorize=False)
    elif (
        pa.types.is_string(values.type)
        or pa.types.is_large_string(values.type)
        or pa.types.is_dictionary(values.type)
    ):
        if not pa.types.is_dictionary(values.type):
            values = pc.dictionary_encode(values)
        # hash each distinct value once, then gather (categorical columns have few values)
        dictionary = values.dictionary.cast(pa.string()).to_numpy(zero_copy_only=False).astype(object)
        table = pd.util.hash_array(np.append(dictionary, "\x00<null>").astype(object), categorize=False)
        idx = pc.fill_null(values.indices.cast(pa.int64()), len(dictionary)).to_numpy(zero_copy_only=False)
        hashed = table[idx]
    else:
        raise DataValidationError(f"sparse feature of type {values.type} is not supported (int or string)")
    return (hashed % np.uint64(num_embeddings)).astype(np.int64)


def normalize_dense(matrix: np.ndarray) -> np.ndarray:
    """Nulls/NaN/inf -> 0, then sign(x)·log1p(|x|): counts span orders of magnitude, rates do not
    change much. Pure and per-row, so training and scoring agree without fitted statistics."""
    x = np.nan_to_num(matrix.astype(np.float32, copy=False), nan=0.0, posinf=0.0, neginf=0.0)
    return np.sign(x) * np.log1p(np.abs(x))


@dataclass
class Chunk:
    """Encoded rows: ids [n, tables] int64, dense [n, D] float32, labels [n] float32, and for
    eval the keys (request ids, pin ids)."""

    ids: np.ndarray
    dense: np.ndarray
    labels: np.ndarray
    request_ids: np.ndarray | None = None
    pin_ids: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def take(self, idx: np.ndarray | slice) -> Chunk:
        return Chunk(
            self.ids[idx],
            self.dense[idx],
            self.labels[idx],
            None if self.request_ids is None else self.request_ids[idx],
            None if self.pin_ids is None else self.pin_ids[idx],
        )

    @staticmethod
    def concat(chunks: Sequence[Chunk]) -> Chunk:
        if len(chunks) == 1:
            return chunks[0]
        keys = chunks[0].request_ids is not None
        return Chunk(
            np.concatenate([c.ids for c in chunks]),
            np.concatenate([c.dense for c in chunks]),
            np.concatenate([c.labels for c in chunks]),
            np.concatenate([c.request_ids for c in chunks]) if keys else None,  # type: ignore[misc]
            np.concatenate([c.pin_ids for c in chunks]) if keys else None,  # type: ignore[misc]
        )


def encode(table: pa.Table | pa.RecordBatch, cfg: ModelConfig, where: str, keys: bool = False) -> Chunk:
    """Arrow rows -> Chunk. Bad labels are an error naming the file (no row is dropped)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    ids = np.empty((n, len(cfg.tables)), dtype=np.int64)
    for j, t in enumerate(cfg.tables):
        ids[:, j] = hash_ids(table.column(t.feature), t.num_embeddings)
    dense = np.empty((n, len(cfg.dense_features)), dtype=np.float32)
    for j, name in enumerate(cfg.dense_features):
        col = table.column(name)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            raise DataValidationError(f"{where}: dense feature {name} has type {col.type}, expected numeric")
        dense[:, j] = pc.fill_null(col.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    label_col = table.column(LABEL)
    if label_col.null_count:
        raise DataValidationError(f"{where}: {label_col.null_count} rows have a null {LABEL!r} label")
    labels = label_col.cast(pa.float32()).to_numpy(zero_copy_only=False)
    if n and not np.isin(labels, (0.0, 1.0)).all():
        bad = np.unique(labels[~np.isin(labels, (0.0, 1.0))])[:5]
        raise DataValidationError(f"{where}: label {LABEL!r} must be 0/1, found {bad.tolist()}")
    chunk = Chunk(ids, normalize_dense(dense), np.array(labels, dtype=np.float32))  # writable copy
    if keys:
        chunk.request_ids = table.column(REQUEST_KEY).to_numpy(zero_copy_only=False)
        chunk.pin_ids = table.column("pin_id").to_numpy(zero_copy_only=False)
    return chunk


# ---------------------------------------------------------------- epoch plan (pure)


@dataclass(frozen=True)
class Unit:
    """One row group of one partition file: the unit of reading and of sharding."""

    path: str
    row_group: int
    rows: int


def list_units(paths: Sequence[Path]) -> list[Unit]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    units: list[Unit] = []
    for path in paths:
        try:
            meta = pq.read_metadata(path)
        except (OSError, pa.ArrowException) as exc:
            raise unreadable(path, exc) from None
        units.extend(
            Unit(str(path), g, meta.row_group(g).num_rows)
            for g in range(meta.num_row_groups)
            if meta.row_group(g).num_rows > 0
        )
    return units


@dataclass(frozen=True)
class EpochPlan:
    units_per_rank: tuple[tuple[Unit, ...], ...]
    batch_sizes: np.ndarray  # [world, steps] rows of each rank's batch at each step

    @property
    def steps(self) -> int:
        return int(self.batch_sizes.shape[1])

    @property
    def rows(self) -> int:
        return int(self.batch_sizes.sum())

    def global_rows(self, step: int) -> int:
        return int(self.batch_sizes[:, step].sum())


def plan_epoch(units: Sequence[Unit], world: int, global_batch: int, seed: int, epoch: int) -> EpochPlan:
    """Deal units to ranks (seeded permutation, greedy to the least-loaded rank) and size batches
    so that every rank takes the same number of steps and every row is used once."""
    if not units:
        raise DataValidationError("no rows to train on")
    rng = np.random.default_rng([seed, epoch, 0x5EED])
    order = rng.permutation(len(units))
    assigned: list[list[Unit]] = [[] for _ in range(world)]
    load = np.zeros(world, dtype=np.int64)
    for i in order:
        r = int(np.argmin(load))  # ties -> lowest rank: deterministic
        assigned[r].append(units[i])
        load[r] += units[i].rows
    local_batch = max(1, math.ceil(global_batch / world))
    steps = math.ceil(int(load.max()) / local_batch)
    if int(load.min()) < steps:
        raise DataValidationError(
            f"cannot balance {int(load.sum())} rows in {len(units)} row groups over {world} ranks "
            f"(a rank would get {int(load.min())} rows for {steps} steps): use fewer processes, a "
            f"larger window or smaller parquet row groups"
        )
    sizes = np.stack([(n // steps) + (np.arange(steps) < n % steps) for n in load.tolist()]).astype(np.int64)
    return EpochPlan(tuple(tuple(a) for a in assigned), sizes)


# ---------------------------------------------------------------- streaming


def read_units(units: Sequence[Unit], cfg: ModelConfig, keys: bool = False) -> Iterator[Chunk]:
    """Decode row groups slice by slice, in the given order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = required_columns(cfg, eval_keys=keys)
    for unit in units:
        try:
            pf = pq.ParquetFile(unit.path)
            batches = pf.iter_batches(
                batch_size=READ_SLICE_ROWS, row_groups=[unit.row_group], columns=columns
            )
            while True:
                try:
                    rb = next(batches)
                except StopIteration:
                    break
                yield encode(rb, cfg, where=f"{unit.path} (row group {unit.row_group})", keys=keys)
        except (OSError, pa.ArrowException) as exc:  # decoding fails only when a page is read
            if isinstance(exc, OSError) and exc.errno is not None:
                raise  # the environment's (ENOSPC, EACCES ...): the CLI names it
            raise unreadable(unit.path, exc) from None


class Rows(Protocol):
    """What the shuffle buffer and the batch cutter need of a block of rows: a :class:`Chunk`, or
    the input pipeline's records (ranking.trainer.datasets.input.Records); ``concat`` is a static method."""

    def __len__(self) -> int: ...

    def take(self: R, idx: np.ndarray | slice) -> R: ...


R = TypeVar("R", bound=Rows)


def _concat(parts: Sequence[R]) -> R:
    return type(parts[0]).concat(parts)  # type: ignore[attr-defined,no-any-return]


def shuffle_stream(chunks: Iterator[R], buffer_rows: int, rng: np.random.Generator) -> Iterator[R]:
    """Bounded shuffle: hold up to ``buffer_rows`` rows; when full, permute and release half."""
    if buffer_rows <= 0:
        yield from chunks
        return
    held: list[R] = []
    size = 0
    for chunk in chunks:
        held.append(chunk)
        size += len(chunk)
        if size >= buffer_rows:
            buf = _concat(held).take(rng.permutation(size))
            keep = buffer_rows // 2
            yield buf.take(slice(0, size - keep))
            held, size = [buf.take(slice(size - keep, size))], keep
    if size:
        buf = _concat(held)
        yield buf.take(rng.permutation(size))


def rebatch(chunks: Iterator[R], sizes: Sequence[int]) -> Iterator[R]:
    """Cut a stream of chunks into batches of exactly ``sizes`` rows (the stream must hold
    exactly sum(sizes) rows; anything else is an error, not a silent drop)."""
    pending: list[R] = []
    have = 0
    it = iter(chunks)
    for want in sizes:
        while have < want:
            try:
                c = next(it)
            except StopIteration:
                raise DataValidationError(
                    f"data ended early: {have} rows left for a batch of {want}"
                ) from None
            pending.append(c)
            have += len(c)
        buf = _concat(pending)
        yield buf.take(slice(0, want))
        rest = buf.take(slice(want, have))
        pending, have = ([rest] if len(rest) else []), have - want
    extra = have + sum(len(c) for c in it)
    if extra:
        raise DataValidationError(f"data holds {extra} rows more than its row-group metadata says")


def to_train_batch(chunk: Chunk, cfg: ModelConfig, weight: float) -> TrainBatch:
    import torch
    from torchrec import KeyedJaggedTensor

    from ranking.trainer.models.model import TrainBatch

    n = len(chunk)
    features = len(cfg.tables)
    # one id per row per feature: the per-key lengths and offsets are known, so they are given
    # instead of computed from the lengths tensor (a reduction + host copy per batch)
    kjt = KeyedJaggedTensor(
        keys=list(cfg.sparse_features),
        values=torch.from_numpy(np.ascontiguousarray(chunk.ids.T).reshape(-1)),
        lengths=torch.ones(n * features, dtype=torch.int32),
        stride=n,
        length_per_key=[n] * features,
        offset_per_key=[i * n for i in range(features + 1)],
    )
    return TrainBatch(
        dense_features=torch.from_numpy(chunk.dense),
        sparse_features=kjt,
        labels=torch.from_numpy(chunk.labels),
        weights=torch.full((n,), weight, dtype=torch.float32),
    )


def train_batches(
    plan: EpochPlan, rank: int, cfg: ModelConfig, shuffle_buffer_rows: int, seed: int, epoch: int
) -> Iterator[TrainBatch]:
    """This rank's batches for one epoch, in a seeded order."""
    rng = np.random.default_rng([seed, epoch, rank])
    stream = shuffle_stream(read_units(plan.units_per_rank[rank], cfg), shuffle_buffer_rows, rng)
    for step, chunk in enumerate(rebatch(stream, plan.batch_sizes[rank].tolist())):
        yield to_train_batch(chunk, cfg, 1.0 / plan.global_rows(step))


def eval_chunks(paths: Sequence[Path], cfg: ModelConfig, batch_rows: int) -> Iterator[Chunk]:
    """The eval day in file order, with request/pin keys, in batches of at most ``batch_rows``."""
    pending: list[Chunk] = []
    have = 0
    for chunk in read_units(list_units(paths), cfg, keys=True):
        pending.append(chunk)
        have += len(chunk)
        while have >= batch_rows:
            buf = Chunk.concat(pending)
            yield buf.take(slice(0, batch_rows))
            pending, have = [buf.take(slice(batch_rows, have))], have - batch_rows
    if have:
        yield Chunk.concat(pending)
