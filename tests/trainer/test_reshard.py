"""Sharded checkpoints reshard: a checkpoint written by 2 ranks resumes on 1 (and the reverse)
and ends with exactly the model of an uninterrupted run at the new world size.

The uninterrupted run at the new size writes its epoch-1 checkpoint; that state is rewritten as
if the other world size had written it (tests/trainer/reshard_worker.py: load into that many
ranks' shards, save), then resumed at the new size: the final export must equal the
uninterrupted run's bit for bit (tables, fused table-optimizer state, dense layers and optimizer).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from ranking.trainer.checkpoint import checksum_path, epoch_checkpoint_path, load_checkpoint
from ranking.trainer.state import read_meta
from tests.trainer.conftest import END, ranker_cmd, ranker_env
from tests.trainer.windowgen import write_window

DAYS = 3
REPO = Path(__file__).resolve().parents[2]


def _train(home: Path, cfg: Path, out: Path, nproc: int, resume: bool = False) -> dict[str, Any]:
    args = [
        "train", "--home", str(home), "--end", END.isoformat(), "--days", str(DAYS),
        "--epochs", "2", "--schedule", "joint", "--batch-size", "256", "--warm-start", "none",
        "--no-register", "--model-config", str(cfg), "--out", str(out), "--nproc", str(nproc),
        "--json", "--no-progress",
    ]  # fmt: skip
    if resume:
        args.append("--resume")
    proc = subprocess.run(ranker_cmd(*args), capture_output=True, text=True, timeout=600, env=ranker_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def _reshard(src: Path, dst: Path, cfg: Path, nproc: int) -> None:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        f"--nproc-per-node={nproc}", str(REPO / "tests" / "trainer" / "reshard_worker.py"),
        str(src), str(dst), str(cfg), "0",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ranker_env(), cwd=REPO)
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


def _resume_at(home: Path, cfg: Path, reference: Path, out: Path, written_by: int, nproc: int) -> None:
    """Epoch 1 of ``reference`` rewritten by ``written_by`` ranks into ``out``, resumed at ``nproc``."""
    src = epoch_checkpoint_path(reference, 1)
    dst = epoch_checkpoint_path(out, 1)
    dst.parent.mkdir(parents=True)
    _reshard(src, dst, cfg, written_by)
    meta = read_meta(dst)
    assert meta["world_size"] == written_by and meta["epoch"] == 1
    ranks = {p.name.split("_")[2] for p in dst.glob("__*_*.distcp")}
    assert len(ranks) == written_by, ranks  # every rank wrote its own shard file
    assert checksum_path(dst).is_file()
    shutil.copy(reference / "model_config.json", out / "model_config.json")
    summary = _train(home, cfg, out, nproc, resume=True)
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
    resumed = json.loads((tmp_path / "resumed" / "train_manifest.json").read_text())
    assert [e["loss"] for e in resumed["epochs"]] == [e["loss"] for e in whole["epochs"]]


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


def test_a_table_row_gets_the_same_initial_values_whatever_shard_holds_it(model_config) -> None:  # type: ignore[no-untyped-def]
    from ranking.trainer.init import BLOCK_ROWS, table_rows

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
    from ranking.trainer.init import seed_tables
    from ranking.trainer.state import export_checkpoint

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
