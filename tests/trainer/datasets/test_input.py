"""The input pipeline (ranking.trainer.datasets.input) makes exactly the inline path's batches, whatever its
workers, prefetch depth or cache state; its cache follows rebuilt partitions; errors reach the step."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from ranking.core.errors import DataValidationError
from ranking.trainer.datasets import window as data
from ranking.trainer.datasets.input import EncodedUnitCache, InputOptions, ready_batches
from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches


def _assert_same(ours, theirs) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = list(ours), list(theirs)
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a.dense_features, b.dense_features)
        assert torch.equal(a.labels, b.labels) and torch.equal(a.weights, b.weights)
        assert a.sparse_features.keys() == b.sparse_features.keys()
        assert a.sparse_features.values().dtype == b.sparse_features.values().dtype == torch.int64
        assert torch.equal(a.sparse_features.values(), b.sparse_features.values())
        assert torch.equal(a.sparse_features.lengths(), b.sparse_features.lengths())


def _copy_window(manifest, tmp_path: Path) -> list[Path]:  # type: ignore[no-untyped-def]
    paths = []
    for part in manifest.train:
        dst = tmp_path / "windows" / "parts" / part.date.isoformat() / part.path.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(part.path, dst)
        paths.append(dst)
    return paths


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize(
    "options",
    [
        InputOptions(workers=0, prefetch_batches=0, cache=False),
        InputOptions(workers=0, prefetch_batches=3, cache=True),
        InputOptions(workers=1, worker_min_rows=0, prefetch_batches=2, cache=True),
    ],
    ids=["inline", "thread+cache", "worker+thread+cache"],
)
def test_batches_equal_the_inline_path_cold_and_warm(
    manifest, model_config, tmp_path: Path, world: int, options
) -> None:  # type: ignore[no-untyped-def]
    units = list_units(_copy_window(manifest, tmp_path))
    cache_root = tmp_path / "windows" / ".encoded"
    for epoch in (1, 2):  # epoch 1 fills the cache (when on), epoch 2 reads it
        plan = plan_epoch(units, world, 300, seed=5, epoch=epoch)
        for rank in range(world):
            ours = ready_batches(plan, rank, model_config, 1000, 5, epoch, options, cache_root)
            _assert_same(ours, train_batches(plan, rank, model_config, 1000, 5, epoch))
    entries = sorted(cache_root.glob("*.npy")) if cache_root.exists() else []
    assert len(entries) == (len(units) if options.cache else 0)


def test_slices_and_an_unbuffered_shuffle_match_too(
    manifest, model_config, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Row groups longer than a read slice: the buffer must fill at the same rows as the reader's slices."""
    monkeypatch.setattr(data, "READ_SLICE_ROWS", 100)
    units = list_units(_copy_window(manifest, tmp_path))
    plan = plan_epoch(units, 1, 128, seed=1, epoch=1)
    for buffer in (0, 250):
        warm = InputOptions(workers=0, prefetch_batches=1)
        for _ in range(2):  # cold, then warm
            ours = list(ready_batches(plan, 0, model_config, buffer, 1, 1, warm, tmp_path / "cache"))
            # unshuffled warm batches are slices of the cache's read-only map: never handed to torch as such
            assert all(
                b.dense_features.numpy().flags.writeable and b.labels.numpy().flags.writeable for b in ours
            )
            _assert_same(ours, train_batches(plan, 0, model_config, buffer, 1, 1))


def test_a_rebuilt_partition_replaces_its_cache_entry(manifest, model_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    paths = _copy_window(manifest, tmp_path)
    cache_root = tmp_path / "cache"
    options = InputOptions(workers=0, prefetch_batches=0)
    plan = plan_epoch(list_units(paths), 1, 256, seed=0, epoch=1)
    list(ready_batches(plan, 0, model_config, 0, 0, 1, options, cache_root))
    before = set(cache_root.glob("*.npy"))
    # rebuild one partition with other rows (labels flipped), as the window step would replace it
    import pyarrow as pa

    table = pq.read_table(paths[0])
    column = table.schema.get_field_index("saved")
    flipped_labels = pa.array(1 - table["saved"].to_numpy(), type=table.schema.field(column).type)
    flipped = table.set_column(column, table.schema.field(column), flipped_labels)
    pq.write_table(flipped, paths[0], row_group_size=256)
    os.utime(paths[0], ns=(1, 1))  # a new identity even on a coarse clock
    plan = plan_epoch(list_units(paths), 1, 256, seed=0, epoch=1)
    _assert_same(
        ready_batches(plan, 0, model_config, 0, 0, 1, options, cache_root),
        train_batches(plan, 0, model_config, 0, 0, 1),
    )
    after = set(cache_root.glob("*.npy"))
    assert len(after) == len(before)  # the old entries of the rebuilt file are gone, not kept beside
    rebuilt = {p.name.split(".")[0] for p in after - before}
    assert len(rebuilt) == 1 and {p.name.split(".")[0] for p in before - after} == rebuilt


def test_a_damaged_cache_entry_is_decoded_again(manifest, model_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    paths = _copy_window(manifest, tmp_path)
    cache_root = tmp_path / "cache"
    options = InputOptions(workers=0, prefetch_batches=0)
    plan = plan_epoch(list_units(paths), 1, 256, seed=0, epoch=1)
    list(ready_batches(plan, 0, model_config, 0, 0, 1, options, cache_root))
    victims = sorted(cache_root.glob("*.npy"))[:2]
    victims[0].write_bytes(victims[0].read_bytes()[:100])  # truncated
    victims[1].write_bytes(b"not an array at all")
    _assert_same(
        ready_batches(plan, 0, model_config, 0, 0, 1, options, cache_root),
        train_batches(plan, 0, model_config, 0, 0, 1),
    )
    unit = plan.units_per_rank[0][0]
    assert EncodedUnitCache(cache_root, model_config).load(unit) is not None


def test_cache_entries_honour_the_umask(manifest, model_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    paths = _copy_window(manifest, tmp_path)
    old = os.umask(0o027)
    try:
        plan = plan_epoch(list_units(paths[:1]), 1, 256, seed=0, epoch=1)
        list(ready_batches(plan, 0, model_config, 0, 0, 1, InputOptions(workers=0), tmp_path / "cache"))
    finally:
        os.umask(old)
    modes = {p.stat().st_mode & 0o777 for p in (tmp_path / "cache").glob("*.npy")}
    assert modes == {0o640}


@pytest.mark.parametrize("workers", [0, 1])
def test_a_damaged_partition_fails_at_the_step_with_its_name(
    manifest, model_config, tmp_path: Path, workers: int
) -> None:  # type: ignore[no-untyped-def]
    paths = _copy_window(manifest, tmp_path)
    raw = bytearray(paths[1].read_bytes())
    raw[4 : len(raw) // 2] = b"\xff" * (len(raw) // 2 - 4)  # the pages, not the footer
    paths[1].write_bytes(bytes(raw))
    plan = plan_epoch(list_units(paths), 1, 256, seed=0, epoch=1)
    options = InputOptions(workers=workers, worker_min_rows=0, prefetch_batches=2)
    with pytest.raises(DataValidationError, match=f"{paths[1].parent.name}.*unreadable"):
        list(ready_batches(plan, 0, model_config, 0, 0, 1, options, tmp_path / "cache"))
    assert not [t for t in threading.enumerate() if t.name == "ranker-input"]


def test_closing_early_stops_the_input_thread(manifest, model_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plan = plan_epoch(list_units(_copy_window(manifest, tmp_path)), 1, 64, seed=0, epoch=1)
    batches = ready_batches(plan, 0, model_config, 0, 0, 1, InputOptions(workers=0, prefetch_batches=2), None)
    first = next(batches)
    assert len(first) == 64
    assert [t for t in threading.enumerate() if t.name == "ranker-input"]
    batches.close()
    assert not [t for t in threading.enumerate() if t.name == "ranker-input"]


def test_bad_options_are_refused() -> None:
    from ranking.trainer.models.config import ConfigError

    with pytest.raises(ConfigError):
        InputOptions(workers=-1)
    with pytest.raises(ConfigError):
        InputOptions(prefetch_batches=-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
@pytest.mark.gpu
def test_pinned_batches_copy_to_the_gpu(manifest, model_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plan = plan_epoch(list_units(_copy_window(manifest, tmp_path)), 1, 256, seed=0, epoch=1)
    options = InputOptions(workers=0, prefetch_batches=2, pin_memory=True)
    for batch in ready_batches(plan, 0, model_config, 0, 0, 1, options, tmp_path / "cache"):
        assert batch.dense_features.is_pinned() and batch.sparse_features.values().is_pinned()
        on_gpu = batch.to(torch.device("cuda"), non_blocking=True)
        assert np.isfinite(on_gpu.dense_features.sum().item())
