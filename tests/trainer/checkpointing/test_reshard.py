"""Sharded checkpoints reshard: a checkpoint written by 2 ranks resumes on 1 (and the reverse)
and ends with exactly the model of an uninterrupted run at the new world size.

The uninterrupted run at the new size writes its epoch-1 checkpoint; that state is rewritten as
if the other world size had written it (tests/trainer/checkpointing/reshard_worker.py: load into that many
ranks' shards, save), then resumed at the new size: the final export must equal the
uninterrupted run's bit for bit (tables, fused table-optimizer state, dense layers and optimizer).

At 2 ranks the planner keeps these tiny tables whole (table-wise, the only choice torchrec offers
on CPU); the row-wise tests force every table row-wise (``$RANKER_SHARDING_TYPES``, read by every
torchrun worker), so each table's rows and momentum are cut across both ranks' shard files and DCP
reshards within a table. Their window deals equal row counts to both ranks: row-wise on gloo needs
every rank's batch to be the same size at every step (docs/training.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from features.windowgen import write_window
from ranking.trainer.checkpointing.checkpoint import checksum_path, epoch_checkpoint_path, load_checkpoint
from ranking.trainer.checkpointing.state import MODEL, TABLE_OPT, _reader, read_meta
from ranking.trainer.distributed.setup import SHARDING_TYPES_ENV
from tests.trainer.conftest import END, ranker_cmd, ranker_env

DAYS = 3
REPO = Path(__file__).resolve().parents[3]
TABLES = MODEL + "sparse_arch.embedding_bags."


def _env(sharding: str | None) -> dict[str, str]:
    """ranker_env(), with the planner limited to ``sharding`` (e.g. "row_wise") when given."""
    env = ranker_env()
    env.pop(SHARDING_TYPES_ENV, None)
    if sharding is not None:
        env[SHARDING_TYPES_ENV] = sharding
    return env


def _train(
    home: Path, cfg: Path, out: Path, nproc: int, resume: bool = False, sharding: str | None = None
) -> dict[str, Any]:
    args = [
        "train", "--home", str(home), "--end", END.isoformat(), "--days", str(DAYS),
        "--epochs", "2", "--schedule", "joint", "--batch-size", "256", "--warm-start", "none",
        "--no-register", "--model-config", str(cfg), "--out", str(out), "--nproc", str(nproc),
        "--json", "--no-progress",
    ]  # fmt: skip
    if resume:
        args.append("--resume")
    proc = subprocess.run(ranker_cmd(*args), capture_output=True, text=True, timeout=600, env=_env(sharding))
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def _reshard_cmd(src: Path, dst: Path, cfg: Path, nproc: int) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        f"--nproc-per-node={nproc}", str(REPO / "tests" / "trainer" / "checkpointing" / "reshard_worker.py"),
        str(src), str(dst), str(cfg), "0",
    ]  # fmt: skip


def _reshard(src: Path, dst: Path, cfg: Path, nproc: int, sharding: str | None = None) -> None:
    cmd = _reshard_cmd(src, dst, cfg, nproc)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(sharding), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _assert_same_export(want_path: Path, got_path: Path) -> None:
    want, got = load_checkpoint(want_path), load_checkpoint(got_path)
    for part in ("model", "table_optimizer"):
        assert want[part].keys() == got[part].keys(), part
        for key in want[part]:
            assert torch.equal(want[part][key], got[part][key]), (part, key)
    assert want["dense_optimizer"]["state"].keys() == got["dense_optimizer"]["state"].keys()
    for index, values in want["dense_optimizer"]["state"].items():
        for name, value in values.items():
            assert torch.equal(value, got["dense_optimizer"]["state"][index][name]), (index, name)
    assert any(bool(v.any()) for v in got["table_optimizer"].values())  # momentum really carried


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, model_config) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("reshard")
    write_window(home, END, DAYS, 2000, seed=5, row_group_size=400, eval_rows=1000)
    cfg = home / "model_config.json"
    cfg.write_text(model_config.to_json())
    return home, cfg


def _files_by_key(folder: Path) -> dict[str, set[str]]:
    """{DCP key: the rank numbers of the shard files (``__<rank>_<i>.distcp``) holding its chunks}."""
    out: dict[str, set[str]] = {}
    for index, info in _reader(folder).read_metadata().storage_data.items():
        out.setdefault(index.fqn, set()).add(str(info.relative_path).split("_")[2])
    return out


def _assert_tables_cut_across(folder: Path, ranks: set[str]) -> None:
    """Every table and its fused optimizer state sits in several chunks, on every one of ``ranks``."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = _reader(folder).read_metadata()
    files = _files_by_key(folder)
    keys = [k for k in metadata.state_dict_metadata if k.startswith((TABLES, TABLE_OPT))]
    assert len([k for k in keys if k.startswith(TABLES)]) == 4
    assert len([k for k in keys if k.startswith(TABLE_OPT)]) == 4
    for key in keys:
        md = metadata.state_dict_metadata[key]
        assert isinstance(md, TensorStorageMetadata)
        assert len(md.chunks) == len(ranks), (key, md.chunks)
        assert {tuple(c.offsets)[1:] for c in md.chunks} == {(0,) * (len(md.size) - 1)}, key  # rows only
        assert sum(c.sizes[0] for c in md.chunks) == md.size[0], key
        assert files[key] == ranks, (key, files[key])


def _assert_same_losses(resumed: Path, whole: dict[str, Any]) -> None:
    """The resumed run's per-epoch losses (its train manifest) equal the uninterrupted run's."""
    manifest = json.loads((resumed / "train_manifest.json").read_text())
    assert [e["loss"] for e in manifest["epochs"]] == [e["loss"] for e in whole["epochs"]]


@pytest.fixture(scope="module")
def even_setup(tmp_path_factory: pytest.TempPathFactory, model_config) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """12 row groups of 500 rows: 6 to each of 2 ranks, so their batches match at every step."""
    home = tmp_path_factory.mktemp("reshard-even")
    write_window(home, END, DAYS, 2000, seed=5, row_group_size=500, eval_rows=1000)
    cfg = home / "model_config.json"
    cfg.write_text(model_config.to_json())
    return home, cfg


def _resume_at(
    home: Path,
    cfg: Path,
    reference: Path,
    out: Path,
    written_by: int,
    nproc: int,
    sharding: str | None = None,
    check: Callable[[Path], None] | None = None,
) -> None:
    """Epoch 1 of ``reference`` rewritten by ``written_by`` ranks into ``out`` (then ``check``ed),
    resumed at ``nproc``; both planned with ``sharding`` when given."""
    src = epoch_checkpoint_path(reference, 1)
    dst = epoch_checkpoint_path(out, 1)
    dst.parent.mkdir(parents=True)
    _reshard(src, dst, cfg, written_by, sharding)
    if check is not None:
        check(dst)
    meta = read_meta(dst)
    assert meta["world_size"] == written_by and meta["epoch"] == 1
    ranks = {p.name.split("_")[2] for p in dst.glob("__*_*.distcp")}
    assert len(ranks) == written_by, ranks  # every rank wrote its own shard file
    assert checksum_path(dst).is_file()
    shutil.copy(reference / "model_config.json", out / "model_config.json")
    summary = _train(home, cfg, out, nproc, resume=True, sharding=sharding)
    assert summary["resumed_after_epoch"] == 1 and summary["world_size"] == nproc


@pytest.mark.slow
def test_saved_at_two_ranks_resumed_at_one_equals_the_uninterrupted_one_rank_run(
    tmp_path: Path, setup: tuple[Path, Path]
) -> None:
    home, cfg = setup
    reference = tmp_path / "one"
    whole = _train(home, cfg, reference, 1)
    _resume_at(home, cfg, reference, tmp_path / "resumed", written_by=2, nproc=1)
    _assert_same_export(reference / "model.pt", tmp_path / "resumed" / "model.pt")
    _assert_same_losses(tmp_path / "resumed", whole)


@pytest.mark.slow
def test_saved_at_one_rank_resumed_at_two_equals_the_uninterrupted_two_rank_run(
    tmp_path: Path, setup: tuple[Path, Path]
) -> None:
    home, cfg = setup
    reference = tmp_path / "two"
    whole = _train(home, cfg, reference, 2)
    assert {p.split("@")[1] for p in whole["sharding"].values()} == {"0", "1"}
    _resume_at(home, cfg, reference, tmp_path / "resumed", written_by=1, nproc=2)
    _assert_same_export(reference / "model.pt", tmp_path / "resumed" / "model.pt")


@pytest.mark.slow
def test_saved_row_wise_at_two_ranks_resumed_at_one_equals_the_uninterrupted_one_rank_run(
    tmp_path: Path, even_setup: tuple[Path, Path]
) -> None:
    """Every table cut by rows across both ranks' shard files (tables and momentum), read back
    into one rank's whole tables."""
    home, cfg = even_setup
    reference = tmp_path / "one"
    whole = _train(home, cfg, reference, 1, sharding="row_wise")
    assert set(whole["sharding"].values()) == {"row_wise/fused@0"}
    on_both = functools.partial(_assert_tables_cut_across, ranks={"0", "1"})
    _resume_at(
        home, cfg, reference, tmp_path / "resumed", written_by=2, nproc=1, sharding="row_wise", check=on_both
    )
    _assert_same_export(reference / "model.pt", tmp_path / "resumed" / "model.pt")
    _assert_same_losses(tmp_path / "resumed", whole)


@pytest.mark.slow
def test_saved_at_one_rank_resumed_row_wise_at_two_equals_the_uninterrupted_two_rank_run(
    tmp_path: Path, even_setup: tuple[Path, Path]
) -> None:
    """One rank's whole tables read into row shards on both ranks, against a 2-rank run that was
    row-wise from the start."""
    home, cfg = even_setup
    reference = tmp_path / "two"
    whole = _train(home, cfg, reference, 2, sharding="row_wise")
    assert set(whole["sharding"].values()) == {"row_wise/fused@0,1"}
    _assert_tables_cut_across(epoch_checkpoint_path(reference, 1), {"0", "1"})
    _resume_at(home, cfg, reference, tmp_path / "resumed", written_by=1, nproc=2, sharding="row_wise")
    _assert_same_export(reference / "model.pt", tmp_path / "resumed" / "model.pt")
    _assert_same_losses(tmp_path / "resumed", whole)


CW_DIM = 256  # torchrec cuts column-wise tables into blocks of 128 columns: 2 blocks each


def _wide_config(tmp_path: Path, model_config) -> Path:  # type: ignore[no-untyped-def]
    wide = dataclasses.replace(
        model_config,
        tables=tuple(dataclasses.replace(t, embedding_dim=CW_DIM) for t in model_config.tables),
    )
    path = tmp_path / "wide_config.json"
    path.write_text(wide.to_json())
    return path


def _assert_column_blocks(folder: Path, ranks: set[str]) -> None:
    """Every table in 2 column blocks, its momentum [rows x 2] (block by block); the blocks of
    all tables together sit on every one of ``ranks``."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = _reader(folder).read_metadata()
    files = _files_by_key(folder)
    used: set[str] = set()
    for key, md in metadata.state_dict_metadata.items():
        if not key.startswith((TABLES, TABLE_OPT)):
            continue
        assert isinstance(md, TensorStorageMetadata)
        if key.startswith(TABLES):
            rows = md.size[0]
            assert tuple(md.size)[1] == CW_DIM, key
            assert sorted(tuple(c.offsets) for c in md.chunks) == [(0, 0), (0, CW_DIM // 2)], key
        else:
            rows = md.size[0] // 2
            assert sorted(tuple(c.offsets) for c in md.chunks) == [(0,), (rows,)], key
            assert {tuple(c.sizes) for c in md.chunks} == {(rows,)}, key
        used |= files[key]
    assert used == ranks, used


def _assert_momentum_per_block(export: Path) -> None:
    """Each column block kept its own row-wise momentum: the two halves differ."""
    momentum = load_checkpoint(export)["table_optimizer"]
    assert len(momentum) == 4
    for key, value in momentum.items():
        first, second = value.view(2, -1)
        assert bool(first.any()) and not torch.equal(first, second), key


@pytest.mark.slow
def test_saved_column_wise_at_two_ranks_resumed_at_one_equals_the_uninterrupted_one_rank_run(
    tmp_path: Path, setup: tuple[Path, Path], model_config
) -> None:  # type: ignore[no-untyped-def]
    """Column-wise alone keeps every table's cut (2 blocks of 128 columns) at any world size: at 1
    rank both blocks sit on rank 0, each with its own momentum, and DCP moves the blocks'
    momentum ([rows x 2]) like any tensor."""
    home, _ = setup
    cfg = _wide_config(tmp_path, model_config)
    reference = tmp_path / "one"
    whole = _train(home, cfg, reference, 1, sharding="column_wise")
    assert set(whole["sharding"].values()) == {"column_wise/fused@0,0"}
    _assert_column_blocks(epoch_checkpoint_path(reference, 1), {"0"})
    on_both = functools.partial(_assert_column_blocks, ranks={"0", "1"})
    _resume_at(
        home,
        cfg,
        reference,
        tmp_path / "resumed",
        written_by=2,
        nproc=1,
        sharding="column_wise",
        check=on_both,
    )
    _assert_same_export(reference / "model.pt", tmp_path / "resumed" / "model.pt")
    _assert_momentum_per_block(tmp_path / "resumed" / "model.pt")
    _assert_same_losses(tmp_path / "resumed", whole)


@pytest.mark.slow
def test_saved_column_wise_at_one_rank_resumed_at_two_equals_the_uninterrupted_two_rank_run(
    tmp_path: Path, setup: tuple[Path, Path], model_config
) -> None:  # type: ignore[no-untyped-def]
    home, _ = setup
    cfg = _wide_config(tmp_path, model_config)
    reference = tmp_path / "two"
    whole = _train(home, cfg, reference, 2, sharding="column_wise")
    assert {p.split("/")[0] for p in whole["sharding"].values()} == {"column_wise"}
    _assert_column_blocks(epoch_checkpoint_path(reference, 1), {"0", "1"})
    on_one = functools.partial(_assert_column_blocks, ranks={"0"})
    _resume_at(
        home,
        cfg,
        reference,
        tmp_path / "resumed",
        written_by=1,
        nproc=2,
        sharding="column_wise",
        check=on_one,
    )
    _assert_same_export(reference / "model.pt", tmp_path / "resumed" / "model.pt")
    _assert_momentum_per_block(tmp_path / "resumed" / "model.pt")


@pytest.mark.slow
def test_a_column_wise_checkpoint_does_not_resume_cut_another_way(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    """[rows x 2] momentum has no [rows] form that the uninterrupted whole-table run would have
    had: resuming table-wise is refused with the reason, not averaged."""
    cfg = _wide_config(tmp_path, model_config)
    src = tmp_path / "cw"
    _reshard(Path("init"), src, cfg, 1, sharding="column_wise")
    proc = subprocess.run(
        [*_reshard_cmd(src, tmp_path / "tw", cfg, 1)], capture_output=True, text=True, timeout=300,
        env=_env("table_wise"), cwd=REPO,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "column-wise table's optimizer state is [rows x column blocks]" in proc.stderr


def test_the_sharding_types_can_be_narrowed_but_not_widened(monkeypatch: pytest.MonkeyPatch) -> None:
    from ranking.core.errors import RankerError
    from ranking.trainer.distributed.setup import SHARDING_TYPES, sharding_types

    monkeypatch.delenv(SHARDING_TYPES_ENV, raising=False)
    assert sharding_types() == SHARDING_TYPES == ("table_wise", "row_wise")
    monkeypatch.setenv(SHARDING_TYPES_ENV, " row_wise ")
    assert sharding_types() == ("row_wise",)
    monkeypatch.setenv(SHARDING_TYPES_ENV, "column_wise")
    assert sharding_types() == ("column_wise",)
    for bad in ("column_wise,table_wise", "row_wise,column_wise", "row_wise,data_parallel", ","):
        monkeypatch.setenv(SHARDING_TYPES_ENV, bad)
        with pytest.raises(RankerError, match=SHARDING_TYPES_ENV):
            sharding_types()


def test_a_table_row_gets_the_same_initial_values_whatever_shard_holds_it(model_config) -> None:  # type: ignore[no-untyped-def]
    from ranking.trainer.models.init import BLOCK_ROWS, table_rows

    table = dataclasses.replace(model_config.tables[0], num_embeddings=3 * BLOCK_ROWS + 17)
    whole = table_rows(table, 4, slice(0, table.num_embeddings))
    assert whole.shape == (table.num_embeddings, table.embedding_dim)
    # row-wise cuts across block boundaries, and a column-wise cut
    for rows in (
        slice(0, 5),
        slice(BLOCK_ROWS - 3, 2 * BLOCK_ROWS + 9),
        slice(3 * BLOCK_ROWS, table.num_embeddings),
    ):
        assert torch.equal(table_rows(table, 4, rows), whole[rows])
    assert torch.equal(table_rows(table, 4, slice(10, 20), slice(2, 6)), whole[10:20, 2:6])
    assert not torch.equal(table_rows(table, 5, slice(0, 5)), whole[:5])  # the seed matters
    bound = (1.0 / table.num_embeddings) ** 0.5
    assert float(whole.abs().max()) <= bound and float(whole.std()) > bound / 3


@pytest.mark.slow
def test_one_and_two_processes_start_from_the_same_model(
    tmp_path: Path, setup: tuple[Path, Path], model_config
) -> None:  # type: ignore[no-untyped-def]
    """Built on meta and materialised by DMP at each world size: the same initial weights."""
    from ranking.trainer.checkpointing.state import export_checkpoint
    from ranking.trainer.models.init import seed_tables

    _, cfg = setup
    exports = {}
    for nproc in (1, 2):
        folder = tmp_path / f"init-{nproc}"
        _reshard(Path("init"), folder, cfg, nproc)
        assert read_meta(folder)["world_size"] == nproc
        export_checkpoint(folder, tmp_path / f"init-{nproc}.pt")
        exports[nproc] = load_checkpoint(tmp_path / f"init-{nproc}.pt")["model"]
    assert exports[1].keys() == exports[2].keys()
    for key in exports[1]:
        assert torch.equal(exports[1][key], exports[2][key]), key
    for key, table in seed_tables(model_config, 0).items():
        assert torch.equal(exports[2][key], table), key
