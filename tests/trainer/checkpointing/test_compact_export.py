"""The compact export (format 3, issue 25; ranking.trainer.checkpointing.compact): rows still equal to their
init are not stored, and every reader still gets the dense state bit for bit through
``load_checkpoint``; format-2 files still load."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp

from ranking.trainer.checkpointing import compact as compact
from ranking.trainer.checkpointing.checkpoint import (
    CheckpointError,
    checkpoint_meta,
    epoch_checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from ranking.trainer.checkpointing.state import META_FILE, export_checkpoint
from ranking.trainer.models.config import ModelConfig
from ranking.trainer.models.init import seed_tables
from tests.trainer.conftest import train_request

TABLE_PREFIX = "sparse_arch.embedding_bags."
PARTS = ("model", "table_optimizer")


# ---------------------------------------------------------------- helpers


def dense_epoch_state(folder: Path) -> dict[str, dict[str, torch.Tensor]]:
    """An epoch checkpoint read straight from its DCP shards into dense tensors (no export)."""
    reader = dcp.FileSystemReader(str(folder))
    specs = reader.read_metadata().state_dict_metadata
    flat = {k: torch.zeros(tuple(md.size), dtype=md.properties.dtype) for k, md in specs.items()}
    dcp.load(flat, storage_reader=reader, no_dist=True)
    return {
        "model": {k[len("model.") :]: v for k, v in flat.items() if k.startswith("model.")},
        "table_optimizer": {
            k[len("table_optimizer.") :]: v for k, v in flat.items() if k.startswith("table_optimizer.")
        },
        "dense_optimizer": {k: v for k, v in flat.items() if k.startswith("dense_optimizer.")},
    }


def assert_loads_as(path: Path, want: dict[str, dict[str, torch.Tensor]]) -> dict[str, Any]:
    """``load_checkpoint(path)`` holds exactly ``want``'s tensors, bit for bit, same dtypes."""
    got = load_checkpoint(path)
    for part in PARTS:
        assert got[part].keys() == want[part].keys(), part
        for key, value in want[part].items():
            assert same_bits(got[part][key], value), (part, key)
    flat_dense = {
        f"dense_optimizer.{index}.{name}": value
        for index, values in got["dense_optimizer"]["state"].items()
        for name, value in values.items()
    }
    assert flat_dense.keys() == want["dense_optimizer"].keys()
    for key, value in want["dense_optimizer"].items():
        assert same_bits(flat_dense[key], value), key
    return got


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(
        a.contiguous().view(ints[a.element_size()]), b.contiguous().view(ints[b.element_size()])
    )


def changed_rows(state: dict[str, dict[str, torch.Tensor]], cfg: ModelConfig, seed: int) -> dict[str, int]:
    """Per table tensor, the rows that differ bitwise from ``seed``'s init; per momentum, the
    non-zero rows (what a compact export has to store)."""
    init = seed_tables(cfg, seed)
    out = {
        key: int((value.view(torch.int32) != init[key].view(torch.int32)).any(dim=1).sum())
        for key, value in state["model"].items()
        if key in init
    }
    for key, value in state["table_optimizer"].items():
        out[key] = int((value.view(torch.int32).reshape(value.shape[0], -1) != 0).any(dim=1).sum())
    return out


def stored_rows(path: Path) -> dict[str, int]:
    raw = torch.load(path, weights_only=True, mmap=True)
    assert raw["format"] == 3
    return {key: int(r["rows"].numel()) for part in PARTS for key, r in raw["sparse"][part].items()}


def size_bound(state: dict[str, dict[str, torch.Tensor]], changed: dict[str, int]) -> int:
    """What a compact file may take: each compacted tensor's changed rows (values + an int32
    index) or its dense bytes, everything else dense, and 4 KiB of pickle/zip records per tensor."""
    total, tensors = 0, 0
    for part in ("model", "table_optimizer", "dense_optimizer"):
        for key, value in state[part].items():
            nbytes = value.numel() * value.element_size()
            if key in changed:
                row = nbytes // value.shape[0]
                nbytes = min(nbytes, changed[key] * (row + 4))
            total += nbytes
            tensors += 1
    return total + 4096 * (tensors + 2 * len(changed))


def write_epoch(folder: Path, state: dict[str, dict[str, torch.Tensor]], meta: dict[str, Any]) -> None:
    """An epoch checkpoint folder (the layout ``save_epoch`` writes) of a dense state."""
    flat = {f"model.{k}": v for k, v in state["model"].items()}
    flat.update({f"table_optimizer.{k}": v for k, v in state["table_optimizer"].items()})
    flat.update(state["dense_optimizer"])
    dcp.save(flat, storage_writer=dcp.FileSystemWriter(str(folder)), no_dist=True)
    (folder / META_FILE).write_text(json.dumps({**meta, "dense_param_groups": [{"lr": 0.1}]}))


def fresh_state(cfg: ModelConfig, seed: int) -> dict[str, dict[str, torch.Tensor]]:
    tables = seed_tables(cfg, seed)
    gen = torch.Generator().manual_seed(1)
    return {
        "model": {**tables, "head.weight": torch.rand(1, 8, generator=gen), "head.bias": torch.zeros(1)},
        "table_optimizer": {
            f"model.{key}::{key[len(TABLE_PREFIX) : -len('.weight')]}.momentum1": torch.zeros(value.shape[0])
            for key, value in tables.items()
        },
        "dense_optimizer": {"dense_optimizer.0.exp_avg": torch.rand(1, 8, generator=gen)},
    }


def meta_of(cfg: ModelConfig, seed: int, **more: Any) -> dict[str, Any]:
    return {"model_config": cfg.to_dict(), "train_config": {"seed": seed}, "epoch": 1, **more}


# ---------------------------------------------------------------- round trips


def test_a_fresh_model_stores_no_table_row_and_loads_exactly(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    want = fresh_state(model_config, seed=3)
    write_epoch(tmp_path / "epoch-1", want, meta_of(model_config, 3))
    export_checkpoint(tmp_path / "epoch-1", tmp_path / "model.pt")
    assert_loads_as(tmp_path / "model.pt", want)
    assert set(stored_rows(tmp_path / "model.pt").values()) == {0}  # every table and momentum compact
    loaded = load_checkpoint(tmp_path / "model.pt")
    assert "sparse" not in loaded and loaded["format"] == 3 and loaded["epoch"] == 1


def test_a_trained_model_round_trips_and_stores_only_its_changed_rows(trained: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    want = dense_epoch_state(epoch_checkpoint_path(trained, 1))
    assert_loads_as(trained / "model.pt", want)
    changed = changed_rows(want, model_config, seed=0)
    stored = stored_rows(trained / "model.pt")
    assert stored.keys() <= changed.keys()
    for key, n in stored.items():
        assert n == changed[key], key  # exactly the rows that differ: none missing, none extra
    assert checkpoint_meta(trained / "model.pt")["table_init"] == {t.name: 0 for t in model_config.tables}


def test_every_row_changed_is_stored_and_loads_exactly(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    want = fresh_state(model_config, seed=0)
    gen = torch.Generator().manual_seed(2)
    for key, value in want["model"].items():
        if key.startswith(TABLE_PREFIX):
            value.add_(torch.rand(value.shape, generator=gen) * 1e-3)  # no row left at its init
    for value in want["table_optimizer"].values():
        value.copy_(torch.rand(value.shape, generator=gen) + 0.5)
    write_epoch(tmp_path / "epoch-1", want, meta_of(model_config, 0))
    export_checkpoint(tmp_path / "epoch-1", tmp_path / "model.pt")
    assert_loads_as(tmp_path / "model.pt", want)
    assert stored_rows(tmp_path / "model.pt") == {}  # dense is smaller: nothing compact


def test_a_row_off_by_one_bit_is_stored(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    """Bitwise, not numerically equal: one ulp in a table, -0.0 where the momentum's 0.0 is."""
    want = fresh_state(model_config, seed=0)
    table = f"{TABLE_PREFIX}t_pin_id.weight"
    bits = want["model"][table].view(torch.int32)
    bits[7, 3] += 1
    momentum = next(k for k in want["table_optimizer"] if "t_user_id" in k)
    want["table_optimizer"][momentum][11] = -0.0
    write_epoch(tmp_path / "epoch-1", want, meta_of(model_config, 0))
    export_checkpoint(tmp_path / "epoch-1", tmp_path / "model.pt")
    assert_loads_as(tmp_path / "model.pt", want)
    stored = stored_rows(tmp_path / "model.pt")
    assert stored[table] == 1 and stored[momentum] == 1
    assert sum(stored.values()) == 2


def test_a_warm_start_from_a_base_of_another_seed_keeps_the_bases_reference(
    tmp_path: Path, trained: Path, manifest, model_config
) -> None:  # type: ignore[no-untyped-def]
    """A daily run (seed 5) warm-started from a base (seed 0) keeps the base's untouched rows,
    which are seed 0's init: the reference follows the chain, so only touched rows are stored;
    and the next link (seed 6, from the daily) still refers to the base's seed."""
    from ranking.trainer.loop import run_training

    daily = tmp_path / "daily"
    run_training(
        train_request(
            manifest, model_config, daily, schedule="joint", epochs=1, seed=5, warm_start=trained / "model.pt"
        )
    )
    want = dense_epoch_state(epoch_checkpoint_path(daily, 1))
    assert_loads_as(daily / "model.pt", want)
    assert checkpoint_meta(daily / "model.pt")["table_init"] == {t.name: 0 for t in model_config.tables}
    changed = changed_rows(want, model_config, seed=0)
    stored = stored_rows(daily / "model.pt")
    assert all(n == changed[key] for key, n in stored.items())
    assert {k for k in changed if k.startswith(TABLE_PREFIX)} <= stored.keys()  # every table compact
    own_seed = changed_rows(want, model_config, seed=5)  # what a reference without the chain would store
    tables = [k for k in changed if k.startswith(TABLE_PREFIX)]
    assert sum(changed[k] for k in tables) < sum(own_seed[k] for k in tables)
    assert (daily / "model.pt").stat().st_size <= size_bound(want, changed)

    second = tmp_path / "second"
    run_training(
        train_request(
            manifest, model_config, second, schedule="joint", epochs=1, seed=6, warm_start=daily / "model.pt"
        )
    )
    assert checkpoint_meta(second / "model.pt")["table_init"] == {t.name: 0 for t in model_config.tables}
    assert_loads_as(second / "model.pt", dense_epoch_state(epoch_checkpoint_path(second, 1)))


def test_a_small_workspace_model_file_shrinks_to_its_touched_rows(tmp_path: Path, manifest) -> None:  # type: ignore[no-untyped-def]
    """The default table sizes (~700k rows) on the fixture's 4,500-row window: the file holds the
    touched rows, not the capacity."""
    from ranking.trainer.loop import run_training
    from ranking.trainer.models.config import default_model_config

    cfg = default_model_config(dense_arch=(16, 8), over_arch=(16, 8))
    run = tmp_path / "run"
    run_training(train_request(manifest, cfg, run, schedule="joint", epochs=1))
    want = dense_epoch_state(epoch_checkpoint_path(run, 1))
    assert_loads_as(run / "model.pt", want)
    changed = changed_rows(want, cfg, seed=0)
    capacity = sum(t.num_embeddings for t in cfg.tables)
    touched = sum(n for k, n in changed.items() if k.startswith(TABLE_PREFIX))
    assert 0 < touched < capacity // 100
    dense_bytes = sum(v.numel() * v.element_size() for part in PARTS for v in want[part].values())
    size = (run / "model.pt").stat().st_size
    assert size <= size_bound(want, changed) < dense_bytes // 20


# ---------------------------------------------------------------- old files, bad files


def test_a_format_2_file_still_loads_and_scores(tmp_path: Path, trained: Path, manifest) -> None:  # type: ignore[no-untyped-def]
    """A registry version written before format 3: one torch.save of dense tensors."""
    from ranking.trainer.evaluation.scoring import score_checkpoint

    payload = load_checkpoint(trained / "model.pt")
    old = tmp_path / "v0001" / "model.pt"
    old.parent.mkdir()
    torch.save({**payload, "format": 2}, old)  # the old writer's layout: every tensor dense
    raw = torch.load(old, weights_only=True)
    assert "sparse" not in raw and raw["model"].keys() == payload["model"].keys()
    want = {part: payload[part] for part in PARTS}
    want["dense_optimizer"] = dense_epoch_state(epoch_checkpoint_path(trained, 1))["dense_optimizer"]
    assert_loads_as(old, want)
    new, old_scores = (
        score_checkpoint(trained / "model.pt", manifest.eval.path),
        score_checkpoint(old, manifest.eval.path),
    )
    assert new.equals(old_scores)


def test_a_compact_tensor_that_rebuilds_differently_is_refused(
    tmp_path: Path, model_config, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Another init (or torch RNG) than the one that wrote the file: an error, never a silently
    different model."""
    want = fresh_state(model_config, seed=0)
    write_epoch(tmp_path / "epoch-1", want, meta_of(model_config, 0))
    export_checkpoint(tmp_path / "epoch-1", tmp_path / "model.pt")
    real = compact.table_rows
    monkeypatch.setattr(compact, "table_rows", lambda table, seed, rows: real(table, seed + 1, rows))
    with pytest.raises(CheckpointError, match="does not rebuild to what was exported"):
        load_checkpoint(tmp_path / "model.pt")


def test_a_file_of_a_newer_format_is_refused(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "model.pt", {"model": {}, "sparse": {}})
    torch.save({"format": 4, "model": {}}, tmp_path / "new.pt")
    assert load_checkpoint(tmp_path / "model.pt")["model"] == {}
    with pytest.raises(CheckpointError, match="format-4 checkpoint"):
        load_checkpoint(tmp_path / "new.pt")


def test_tables_of_unknown_origin_are_stored_dense(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    """No model config or seed in the meta: no reference, every table dense (still exact)."""
    want = fresh_state(model_config, seed=0)
    write_epoch(tmp_path / "epoch-1", want, {"epoch": 1})
    export_checkpoint(tmp_path / "epoch-1", tmp_path / "model.pt")
    assert_loads_as(tmp_path / "model.pt", want)
    assert not any(k.startswith(TABLE_PREFIX) for k in stored_rows(tmp_path / "model.pt"))


# ---------------------------------------------------------------- the recorded reference


def test_the_table_init_follows_the_tables(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    from ranking.trainer.loop import _table_init

    base = tmp_path / "base.pt"
    save_checkpoint(base, {"model": {}, **meta_of(model_config, 4, table_init={"t_user_id": 9})})
    old = tmp_path / "old.pt"  # a format-2 base: no table_init, its own seed
    torch.save({"format": 2, "model": {}, **meta_of(model_config, 8)}, old)

    def init(**kw: Any) -> dict[str, int]:
        return _table_init(train_request(manifest, model_config, tmp_path / "run", seed=1, **kw))

    names = [t.name for t in model_config.tables]
    assert init() == dict.fromkeys(names, 1)
    assert init(warm_start=base) == {**dict.fromkeys(names, 4), "t_user_id": 9}
    assert init(warm_start=old) == dict.fromkeys(names, 8)
    assert init(warm_start=base, warm_start_scope="dense") == dict.fromkeys(names, 1)
    assert init(warm_start=tmp_path / "gone.pt") == dict.fromkeys(names, 1)
    req = train_request(manifest, model_config, tmp_path / "run", seed=1, warm_start=base)
    meda = replace(
        req, train_config=replace(req.train_config, remedy="meda")
    )  # tables reset to the run's seed
    assert _table_init(meda) == dict.fromkeys(names, 1)
