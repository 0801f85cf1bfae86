"""The training input pipeline: a window's row groups -> encoded records -> shuffled batches, made
ready ahead of the step.

Three things make it fast enough to keep an accelerator busy (benchmarks/input.py measures them
against :func:`ranking.trainer.datasets.window.train_batches`, the inline path it replaces):

- **Encoded once.** A row group is decoded and encoded (id hashing, dense normalisation) once per
  partition file and encoding, into one record array (ids, dense, label per row), kept as ``.npy``
  in an :class:`EncodedUnitCache` beside the windows. A daily window shares 19 of its 20 days with
  yesterday's and every epoch re-reads the same rows; from the cache they are memory-mapped.
  Cache misses are decoded in background worker processes (``InputOptions.workers``), in order.
- **One gather per shuffle.** The shuffle buffer permutes whole records with one ``np.take``
  instead of a fancy-indexed copy per column.
- **Assembled ahead.** A background thread shuffles, cuts and builds the ``TrainBatch`` es (pinned
  for an asynchronous host-to-device copy on CUDA) while the training step runs; the step takes
  ready batches from a bounded queue.

The order is the inline path's, row for row: the same units in the same slices, the same seeded
shuffle buffer, the same batch sizes. Same seed -> same batches, whatever the number of workers or
the state of the cache, so a resumed epoch sees what an uninterrupted one would (tests/trainer/datasets/test_input.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from features.schema import LABEL
from ranking.core.atomic import atomic_path
from ranking.trainer.datasets import window as _data
from ranking.trainer.datasets.window import (
    Chunk,
    EpochPlan,
    Unit,
    read_units,
    rebatch,
    shuffle_stream,
)
from ranking.trainer.models.config import ConfigError, ModelConfig

if TYPE_CHECKING:
    from ranking.trainer.models.model import TrainBatch

log = logging.getLogger(__name__)

# bump when the encoding of a row changes (hashing, normalisation, layout): old cache entries then
# stop matching and are replaced as they are read
ENCODING_VERSION = 1
CACHE_DIR_NAME = ".encoded"
# decode processes start only for this many rows to decode: a spawned worker costs ~1-2 s of
# imports, what decoding ~2M rows inline costs (a daily run misses one new day, decoded inline)
WORKER_MIN_ROWS = 2_000_000


@dataclass(frozen=True)
class InputOptions:
    """How batches are made ready. None of it changes which rows a batch holds."""

    workers: int = 1  # decode processes for row groups not in the cache (0: decode in the loader thread)
    worker_min_rows: int = WORKER_MIN_ROWS  # fewer rows to decode than this: decode in the loader thread
    prefetch_batches: int = 4  # ready batches held ahead of the step (0: assemble inline, no thread)
    cache: bool = True  # keep encoded row groups as .npy beside the windows
    pin_memory: bool = False  # page-locked batches for a non-blocking copy to a CUDA device

    def __post_init__(self) -> None:
        if self.workers < 0 or self.prefetch_batches < 0 or self.worker_min_rows < 0:
            raise ConfigError("input workers, worker_min_rows and prefetch_batches must be >= 0")


# ---------------------------------------------------------------- records (pure)


@dataclass(frozen=True)
class Layout:
    """A row group's encoded rows as one flat 4-byte array (the cache file's content):
    ``[ids transposed: tables x n int32 | dense: n x D float32 | labels: n float32]``, read back
    as three column views without a copy (float32 columns are stored by their bits)."""

    tables: int
    dense: int

    @staticmethod
    def of(cfg: ModelConfig) -> Layout:
        if any(t.num_embeddings >= 2**31 for t in cfg.tables):
            raise ConfigError("encoded rows hold ids as int32: tables must have < 2^31 rows")
        return Layout(len(cfg.tables), len(cfg.dense_features))

    def words(self, rows: int) -> int:
        return rows * (self.tables + self.dense + 1)

    def flatten(self, cols: Columns) -> np.ndarray:
        return np.concatenate(
            [
                cols.ids_t.astype(np.int32, copy=False).reshape(-1),
                np.ascontiguousarray(cols.dense, dtype=np.float32).view(np.int32).reshape(-1),
                np.ascontiguousarray(cols.labels, dtype=np.float32).view(np.int32),
            ]
        )

    def columns(self, flat: np.ndarray, rows: int) -> Columns:
        t, d = self.tables * rows, self.dense * rows
        return Columns(
            flat[:t].reshape(self.tables, rows),
            flat[t : t + d].view(np.float32).reshape(rows, self.dense),
            flat[t + d :].view(np.float32),
        )


def encoding_key(cfg: ModelConfig) -> str:
    """What the encoded bytes depend on: the columns read and each table's hash range."""
    spec = {
        "version": ENCODING_VERSION,
        "tables": [[t.feature, t.num_embeddings] for t in cfg.tables],
        "dense": list(cfg.dense_features),
        "label": LABEL,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def columns_of(chunk: Chunk) -> Columns:
    return Columns(np.ascontiguousarray(chunk.ids.T, dtype=np.int32), chunk.dense, chunk.labels)


class Columns:
    """Rows as three contiguous columns: ids transposed ([tables, n] int32: each table's ids are
    a contiguous run, the layout of the batch's KeyedJaggedTensor values), dense [n, D] float32
    and labels [n] float32; with the stream interface of :class:`~ranking.trainer.datasets.window.Chunk`
    (take, concat, len), so the shuffle buffer and the batch cutter are the same code for both."""

    __slots__ = ("dense", "ids_t", "labels")

    def __init__(self, ids_t: np.ndarray, dense: np.ndarray, labels: np.ndarray) -> None:
        self.ids_t, self.dense, self.labels = ids_t, dense, labels

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def take(self, idx: np.ndarray | slice) -> Columns:
        if isinstance(idx, slice):
            return Columns(self.ids_t[:, idx], self.dense[idx], self.labels[idx])
        # np.take along an axis: one gather per column, ~20x faster than fancy-indexing a 2-D array
        return Columns(
            np.take(self.ids_t, idx, axis=1), np.take(self.dense, idx, axis=0), np.take(self.labels, idx)
        )

    @staticmethod
    def concat(parts: Sequence[Columns]) -> Columns:
        if len(parts) == 1:
            return parts[0]
        return Columns(
            np.concatenate([p.ids_t for p in parts], axis=1),
            np.concatenate([p.dense for p in parts]),
            np.concatenate([p.labels for p in parts]),
        )


def batch_of(rows: Columns, cfg: ModelConfig, weight: float, pin_memory: bool = False) -> TrainBatch:
    """Columns -> the TrainBatch :func:`ranking.trainer.datasets.window.to_train_batch` makes of the same rows."""
    import torch
    from torchrec import KeyedJaggedTensor

    from ranking.trainer.models.model import TrainBatch

    n = len(rows)
    features = len(cfg.tables)
    values = torch.from_numpy(rows.ids_t.astype(np.int64).reshape(-1))
    batch = TrainBatch(
        dense_features=torch.from_numpy(_writable(rows.dense)),
        sparse_features=KeyedJaggedTensor(
            keys=list(cfg.sparse_features),
            values=values,
            lengths=torch.ones(n * features, dtype=torch.int32),
            stride=n,
            length_per_key=[n] * features,
            offset_per_key=[i * n for i in range(features + 1)],
        ),
        labels=torch.from_numpy(_writable(rows.labels)),
        weights=torch.full((n,), weight, dtype=torch.float32),
    )
    return batch.pin_memory() if pin_memory else batch


def _writable(a: np.ndarray) -> np.ndarray:
    """A tensor may be written to: never hand torch a view of a read-only memory map (an
    unshuffled batch is one)."""
    return a if a.flags.writeable and a.flags.c_contiguous else np.array(a, order="C")


def slices(cols: Columns) -> Iterator[Columns]:
    """A row group's rows in the slices the parquet reader yields them (READ_SLICE_ROWS): the
    shuffle buffer fills at the same rows as on the inline path. Views: a cached row group is
    read (paged in) where the shuffle buffer first copies it."""
    step = _data.READ_SLICE_ROWS
    for start in range(0, len(cols), step):
        yield cols.take(slice(start, start + step))


def encode_unit(unit: Unit, cfg: ModelConfig) -> Columns:
    parts = [columns_of(c) for c in read_units([unit], cfg)]
    if not parts:
        layout = Layout.of(cfg)
        return layout.columns(np.empty(0, dtype=np.int32), 0)
    return Columns.concat(parts)


# ---------------------------------------------------------------- the cache (files)


class EncodedUnitCache:
    """Encoded row groups as ``<root>/<file>.<version>.rg<N>.<encoding>.npy``.

    ``file`` names the partition by its resolved path, ``version`` by its size and modification
    time: a partition that is rebuilt (ranker features window replaces one that no longer matches
    its record) gets a new entry, and storing it removes that row group's entries of other
    versions or encodings. An entry that does not read back as the expected rows is a miss
    (and is replaced)."""

    def __init__(self, root: Path, cfg: ModelConfig) -> None:
        self.root = Path(root)
        self.layout = Layout.of(cfg)
        self.encoding = encoding_key(cfg)

    @staticmethod
    def _names(unit: Unit) -> tuple[str, str]:
        src = Path(unit.path).resolve()
        st = src.stat()
        file_id = hashlib.sha256(str(src).encode()).hexdigest()[:16]
        version = hashlib.sha256(f"{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
        return file_id, version

    def path_for(self, unit: Unit) -> Path:
        file_id, version = self._names(unit)
        return self.root / f"{file_id}.{version}.rg{unit.row_group}.{self.encoding}.npy"

    def load(self, unit: Unit) -> Columns | None:
        return self.read(self.path_for(unit), unit.rows)

    def read(self, path: Path, rows: int) -> Columns | None:
        """The entry's rows as column views of its memory map; None when it is not what it should be."""
        try:
            flat = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # truncated or foreign bytes: decode again
            log.warning("encoded cache entry %s unreadable (%s): decoding the row group again", path, exc)
            return None
        if flat.dtype != np.int32 or flat.shape != (self.layout.words(rows),):
            log.warning("encoded cache entry %s does not hold %d rows: decoding again", path, rows)
            return None
        return self.layout.columns(flat, rows)

    def store(self, unit: Unit, cols: Columns) -> Path:
        path = self.path_for(unit)
        self.root.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, self.layout.flatten(cols), allow_pickle=False)
        file_id = path.name.split(".", 1)[0]
        for other in self.root.glob(f"{file_id}.*.rg{unit.row_group}.*.npy"):
            if other != path:
                other.unlink(missing_ok=True)
        return path


def default_cache_root(window_manifest: Path) -> Path:
    """Beside the windows (``<home>/windows/.encoded``): shared by every window of the workspace."""
    return Path(window_manifest).resolve().parent.parent / CACHE_DIR_NAME


def _decode_in_worker(unit: Unit, cfg: ModelConfig, cache_root: str | None) -> Columns | str:
    """Worker process: encode one row group; with a cache, store it and return its path (the
    rows then reach the trainer by memory map, not through a pipe)."""
    cols = encode_unit(unit, cfg)
    if cache_root is None:
        return cols
    return str(EncodedUnitCache(Path(cache_root), cfg).store(unit, cols))


def unit_records(
    units: Sequence[Unit],
    cfg: ModelConfig,
    cache: EncodedUnitCache | None,
    workers: int,
    min_rows: int = WORKER_MIN_ROWS,
) -> Iterator[Columns]:
    """Each unit's rows, in order: from the cache, else decoded (in ``workers`` processes,
    at most ``2 * workers`` row groups ahead, when at least ``min_rows`` miss; else inline) and stored."""
    cached = [cache.load(u) if cache is not None else None for u in units]
    missing = [i for i, rows in enumerate(cached) if rows is None]
    if not missing or workers == 0 or sum(units[i].rows for i in missing) < min_rows:
        for unit, rows in zip(units, cached, strict=True):
            if rows is None:
                rows = encode_unit(unit, cfg)
                if cache is not None:
                    cache.store(unit, rows)
            yield rows
        return
    import multiprocessing

    # spawn: the trainer holds torch, threads and process groups that a fork must not copy
    root = str(cache.root) if cache is not None else None
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures: dict[int, Future[Columns | str]] = {}
        ahead = iter(missing)

        def submit_next() -> None:
            i = next(ahead, None)
            if i is not None:
                futures[i] = pool.submit(_decode_in_worker, units[i], cfg, root)

        for _ in range(2 * workers):
            submit_next()
        for i, rows in enumerate(cached):
            if rows is None:
                done = futures.pop(i).result()
                submit_next()
                if isinstance(done, str):
                    assert cache is not None
                    stored = cache.read(Path(done), units[i].rows)
                    done = stored if stored is not None else encode_unit(units[i], cfg)
                rows = done
            yield rows


# ---------------------------------------------------------------- batches


def ready_batches(
    plan: EpochPlan,
    rank: int,
    cfg: ModelConfig,
    shuffle_buffer_rows: int,
    seed: int,
    epoch: int,
    options: InputOptions,
    cache_root: Path | None,
) -> Generator[TrainBatch, None, None]:
    """This rank's batches for one epoch: the batches of :func:`ranking.trainer.datasets.window.train_batches`,
    made by the pipeline above. Close the iterator (or exhaust it) to stop its thread and workers."""
    cache = EncodedUnitCache(cache_root, cfg) if options.cache and cache_root is not None else None

    def produce() -> Generator[TrainBatch, None, None]:
        rng = np.random.default_rng([seed, epoch, rank])
        units = plan.units_per_rank[rank]
        stream = (
            s
            for rows in unit_records(units, cfg, cache, options.workers, options.worker_min_rows)
            for s in slices(rows)
        )
        shuffled = shuffle_stream(stream, shuffle_buffer_rows, rng)
        for step, rows in enumerate(rebatch(shuffled, plan.batch_sizes[rank].tolist())):
            yield batch_of(rows, cfg, 1.0 / plan.global_rows(step), options.pin_memory)

    if options.prefetch_batches == 0:
        return produce()
    return prefetched(produce, options.prefetch_batches)


T = TypeVar("T")
_DONE = object()


def prefetched(make: Callable[[], Iterator[T]], depth: int) -> Generator[T, None, None]:
    """Run ``make()`` in a background thread, ``depth`` items ahead of the consumer. Its errors
    reach the consumer at the item where they happened; closing the consumer stops the thread."""
    box: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            it = make()
            try:
                for item in it:
                    if not put(item):
                        return
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            put(_Failed(exc))

    thread = threading.Thread(target=work, name="ranker-input", daemon=True)
    thread.start()
    try:
        while True:
            item = box.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield item
    finally:
        stop.set()
        thread.join()


@dataclass
class _Failed:
    exc: BaseException


def input_options_from_env(device_type: str) -> InputOptions:
    """Defaults, with ``RANKER_INPUT_WORKERS`` / ``RANKER_INPUT_CACHE=0`` (a deployment's choice,
    like the sharding types: it reaches torchrun workers through the environment); pinned memory on CUDA."""
    raw = os.environ.get("RANKER_INPUT_WORKERS", "")
    try:
        workers = int(raw) if raw else InputOptions.workers
    except ValueError:
        raise ConfigError(f"RANKER_INPUT_WORKERS={raw!r}: a whole number >= 0") from None
    cache = os.environ.get("RANKER_INPUT_CACHE", "1") not in ("0", "false", "no")
    return InputOptions(workers=workers, cache=cache, pin_memory=device_type == "cuda")
