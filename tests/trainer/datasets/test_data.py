"""Streaming data: hashing, sharding plan, shuffle, batching, validation errors, bounded memory."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from features.window import read_window_manifest
from features.windowgen import write_window
from ranking.core.errors import DataValidationError
from ranking.trainer.datasets.window import (
    Chunk,
    Unit,
    eval_chunks,
    hash_ids,
    list_units,
    normalize_dense,
    plan_epoch,
    read_units,
    rebatch,
    shuffle_stream,
    train_batches,
    validate_window,
)
from tests.trainer.conftest import END


def test_hash_ids_is_stable_in_range_and_handles_unseen_and_null() -> None:
    ints = pa.array([1, 2, 3, None, 2**40], pa.int64())
    a = hash_ids(ints, 97)
    assert a.dtype == np.int64 and ((a >= 0) & (a < 97)).all()
    assert a[1] == hash_ids(pa.array([2], pa.int64()), 97)[0]  # same id, same row, any batch
    strs = pa.array(["US", None, "DE", "US"])
    b = hash_ids(strs, 13)
    assert b[0] == b[3] and ((b >= 0) & (b < 13)).all()
    # the same as in another chunk with another dictionary
    assert b[2] == hash_ids(pa.array(["FR", "DE"]), 13)[1]
    # pinned values: the mapping must not change between releases (checkpoints depend on it)
    assert hash_ids(pa.array([12345, 0, -7], pa.int64()), 1_000_003).tolist() == [471518, 0, 929306]
    assert hash_ids(pa.array(["US", "food"]), 1_000_003).tolist() == [456173, 593799]
    with pytest.raises(DataValidationError, match="not supported"):
        hash_ids(pa.array([1.5]), 10)


def test_normalize_dense_maps_nonfinite_to_zero_and_compresses_counts() -> None:
    x = np.array([[0.0, np.nan, np.inf, -np.inf, 1000.0, -3.0]], dtype=np.float32)
    y = normalize_dense(x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y[0, :4], 0.0)
    np.testing.assert_allclose(y[0, 4], np.log1p(1000.0), rtol=1e-6)
    np.testing.assert_allclose(y[0, 5], -np.log1p(3.0), rtol=1e-6)


def _units(sizes: list[int]) -> list[Unit]:
    return [Unit(f"f{i}", 0, n) for i, n in enumerate(sizes)]


@pytest.mark.parametrize("world", [1, 2, 3])
def test_plan_epoch_is_disjoint_complete_balanced_and_lockstep(world: int) -> None:
    units = _units([256] * 17 + [100, 37])
    plan = plan_epoch(units, world, global_batch=96, seed=3, epoch=2)
    dealt = [u for rank in plan.units_per_rank for u in rank]
    assert sorted(dealt, key=lambda u: u.path) == sorted(units, key=lambda u: u.path)  # each once
    assert plan.batch_sizes.shape == (world, plan.steps)  # every rank: the same number of steps
    assert plan.rows == sum(u.rows for u in units)  # no row dropped
    rows = plan.batch_sizes.sum(axis=1)
    assert rows.max() - rows.min() <= 256
    assert plan.batch_sizes.max() <= -(-96 // world) and plan.batch_sizes.min() >= 1
    # same seed and epoch -> same plan; another epoch -> another order
    again = plan_epoch(units, world, 96, seed=3, epoch=2)
    assert again.units_per_rank == plan.units_per_rank
    assert (
        plan_epoch(units, 1, 96, seed=3, epoch=3).units_per_rank
        != plan_epoch(units, 1, 96, 3, 2).units_per_rank
    )


def test_plan_epoch_refuses_what_it_cannot_balance() -> None:
    with pytest.raises(DataValidationError, match="cannot balance"):
        plan_epoch(_units([5000, 10]), 2, global_batch=64, seed=0, epoch=1)
    with pytest.raises(DataValidationError, match="no rows"):
        plan_epoch([], 1, 64, 0, 1)


def _chunk(lo: int, hi: int) -> Chunk:
    n = hi - lo
    ids = np.arange(lo, hi, dtype=np.int64).reshape(-1, 1)
    return Chunk(ids, np.zeros((n, 1), np.float32), np.zeros(n, np.float32))


def test_shuffle_is_a_seeded_permutation_with_bounded_buffer() -> None:
    chunks = [_chunk(i * 50, (i + 1) * 50) for i in range(20)]
    out = list(shuffle_stream(iter(chunks), 120, np.random.default_rng(1)))
    ids = np.concatenate([c.ids[:, 0] for c in out])
    assert sorted(ids.tolist()) == list(range(1000))  # every row once
    assert ids.tolist() != list(range(1000))
    assert max(len(c) for c in out) <= 120 + 50
    again = np.concatenate([c.ids[:, 0] for c in shuffle_stream(iter(chunks), 120, np.random.default_rng(1))])
    assert (again == ids).all()


def test_rebatch_cuts_exact_sizes_and_refuses_row_mismatch() -> None:
    chunks = [_chunk(0, 70), _chunk(70, 100)]
    sizes = [33, 33, 34]
    out = list(rebatch(iter(chunks), sizes))
    assert [len(c) for c in out] == sizes
    assert np.concatenate([c.ids[:, 0] for c in out]).tolist() == list(range(100))
    with pytest.raises(DataValidationError, match="ended early"):
        list(rebatch(iter([_chunk(0, 10)]), [6, 6]))
    with pytest.raises(DataValidationError, match="more than"):
        list(rebatch(iter([_chunk(0, 10)]), [4, 4]))


def test_ranks_read_disjoint_shards_covering_the_window(manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    units = list_units([p.path for p in manifest.train])
    assert len(units) > 4  # several row groups per day
    plan = plan_epoch(units, 2, global_batch=256, seed=0, epoch=1)
    seen = []
    for rank in (0, 1):
        batches = list(train_batches(plan, rank, model_config, 500, seed=0, epoch=1))
        assert len(batches) == plan.steps
        for step, b in enumerate(batches):
            assert len(b) == plan.batch_sizes[rank, step]
            np.testing.assert_allclose(b.weights.numpy(), 1.0 / plan.global_rows(step))
        seen.append(sum(len(b) for b in batches))
    assert sum(seen) == manifest.rows_train


def test_train_batches_hold_what_the_parquet_holds(manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    """Without shuffling, batches are the file rows in order, encoded."""
    part = manifest.train[0]
    units = list_units([part.path])
    table = pq.read_table(part.path)
    plan = plan_epoch(units, 1, global_batch=10_000, seed=0, epoch=1)
    # same units in file order
    plan = dataclasses.replace(plan, units_per_rank=(tuple(units),))
    (batch,) = list(train_batches(plan, 0, model_config, 0, seed=0, epoch=1))
    np.testing.assert_array_equal(batch.labels.numpy(), table.column("saved").to_numpy().astype(np.float32))
    pins = batch.sparse_features["pin_id"].values().numpy()
    np.testing.assert_array_equal(
        pins, hash_ids(table.column("pin_id"), model_config.tables[1].num_embeddings)
    )


def _rewrite_manifest(path: Path, **changes: object) -> Path:
    raw = json.loads(path.read_text())
    raw.update(changes)
    out = path.parent.parent / "edited" / "manifest.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(raw))
    return out


def test_validate_window_errors(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    validate_window(manifest, model_config, expected_feature_version=manifest.feature_version)
    with pytest.raises(DataValidationError, match="built with feature definitions"):
        validate_window(manifest, model_config, expected_feature_version="features-v2")
    with pytest.raises(DataValidationError, match="no window manifest"):
        read_window_manifest(tmp_path / "nope" / "manifest.json")
    empty = read_window_manifest(_rewrite_manifest(manifest.path, train=[]))
    with pytest.raises(DataValidationError, match="no training rows"):
        validate_window(empty, model_config)
    raw = json.loads(manifest.path.read_text())
    short = dict(raw["train"][0], rows=raw["train"][0]["rows"] + 1)
    wrong_rows = read_window_manifest(_rewrite_manifest(manifest.path, train=[short]))
    with pytest.raises(DataValidationError, match="manifest says"):
        validate_window(wrong_rows, model_config)
    # a partition without a dense column
    table = pq.read_table(raw["train"][0]["path"]).drop_columns(["pin_stats__age_days"])
    bad = tmp_path / "bad.parquet"
    pq.write_table(table, bad)
    missing = read_window_manifest(
        _rewrite_manifest(manifest.path, train=[dict(raw["train"][0], path=str(bad))])
    )
    with pytest.raises(DataValidationError, match=r"lacks columns \['pin_stats__age_days'\]"):
        validate_window(missing, model_config)


def test_bad_labels_are_an_error_naming_the_file(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    table = pq.read_table(manifest.train[0].path)
    labels = table.column("saved").to_numpy().copy()
    labels[3] = 2
    bad = tmp_path / "labels.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("saved"), "saved", pa.array(labels)), bad)
    with pytest.raises(DataValidationError, match=r"labels.parquet.*must be 0/1"):
        list(read_units(list_units([bad]), model_config))


def _peak_numpy_bytes(home: Path, days: int, model_config) -> int:  # type: ignore[no-untyped-def]
    import tracemalloc

    from ranking.core.workspace import Workspace

    m = read_window_manifest(Workspace(home).window_manifest(END, days))
    plan = plan_epoch(list_units([p.path for p in m.train]), 1, 256, seed=0, epoch=1)
    tracemalloc.start()
    rows = sum(len(b) for b in train_batches(plan, 0, model_config, 2000, seed=0, epoch=1))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rows == m.rows_train
    return peak


def test_peak_memory_does_not_grow_with_window_length(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    write_window(tmp_path, END, 2, 3000, seed=1, row_group_size=1000)
    write_window(tmp_path, END, 8, 3000, seed=1, row_group_size=1000)
    short = _peak_numpy_bytes(tmp_path, 2, model_config)
    long = _peak_numpy_bytes(tmp_path, 8, model_config)
    assert long < 1.5 * short, (short, long)  # 4x the rows, not 4x the memory


def test_eval_chunks_are_the_eval_day_in_file_order_with_keys(manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    """What scoring reads: every row once, in file order, batches of at most batch_rows, keys kept."""
    table = pq.read_table(manifest.eval.path, columns=["request_id", "pin_id", "saved"])
    chunks = list(eval_chunks([manifest.eval.path], model_config, 97))
    assert [len(c) for c in chunks[:-1]] == [97] * (len(chunks) - 1) and 0 < len(chunks[-1]) <= 97
    joined = Chunk.concat(chunks)
    assert len(joined) == manifest.eval.rows
    assert joined.request_ids.tolist() == table.column("request_id").to_pylist()  # type: ignore[union-attr]
    assert joined.pin_ids.tolist() == table.column("pin_id").to_pylist()  # type: ignore[union-attr]
    np.testing.assert_array_equal(joined.labels, table.column("saved").to_numpy().astype(np.float32))


def test_read_window_manifest_refuses_broken_manifests(tmp_path: Path, manifest) -> None:  # type: ignore[no-untyped-def]
    assert read_window_manifest(manifest.path) == manifest
    bad_json = tmp_path / "bad" / "manifest.json"
    bad_json.parent.mkdir()
    bad_json.write_text("{not json")
    with pytest.raises(DataValidationError, match="not valid JSON"):
        read_window_manifest(bad_json)
    raw = json.loads(manifest.path.read_text())
    without_eval = {k: v for k, v in raw.items() if k != "eval"}
    no_eval = tmp_path / "no_eval" / "manifest.json"
    no_eval.parent.mkdir()
    no_eval.write_text(json.dumps(without_eval))
    with pytest.raises(DataValidationError, match="lacks 'eval'"):
        read_window_manifest(no_eval)
    with pytest.raises(DataValidationError, match="train entry needs 'path' and 'rows'"):
        read_window_manifest(_rewrite_manifest(manifest.path, train=[{"date": "2026-11-09"}]))
