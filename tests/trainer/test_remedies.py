"""MEDA (ranking.trainer.remedies): at each epoch start the tables equal the seed's init bit for
bit and their fused optimizer state is empty, while the dense layers carry over unchanged."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from ranking.core.summaries import EpochSummary, TrainSummary
from ranking.trainer.checkpointing.checkpoint import load_checkpoint
from ranking.trainer.checkpointing.state import local_unsharded
from ranking.trainer.distributed import setup as distributed
from ranking.trainer.loop import TABLE_PREFIX, _Trainer, run_training
from tests.trainer.conftest import DAYS, END, epoch_state, ranker_cmd, ranker_env, train_request

SEED = 3


def _seed_init_tables(cfg: Any, seed: int) -> dict[str, torch.Tensor]:
    """The seed's whole tables, drawn row block by row block (ranking.trainer.models.init)."""
    from ranking.trainer.models.init import seed_tables

    return seed_tables(cfg, seed)


def _split(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    tables = {k: v for k, v in state.items() if k.startswith(TABLE_PREFIX)}
    dense = {k: v for k, v in state.items() if not k.startswith(TABLE_PREFIX)}
    return tables, dense


def _equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def epoch_starts(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Model and table-optimizer state at the start of each epoch, after the remedy ran."""
    seen: list[dict[str, Any]] = []
    original = _Trainer._epoch

    def spy(self: _Trainer, epoch: int, units: list[Any], pipeline: Any) -> EpochSummary:
        model_state = {k[len("model.") :]: v for k, v in local_unsharded(self.dmp.state_dict()).items()}
        table_opt = local_unsharded(distributed.table_optimizer_state(self.dmp))
        seen.append({"epoch": epoch, "model": model_state, "table_optimizer": table_opt})
        return original(self, epoch, units, pipeline)

    monkeypatch.setattr(_Trainer, "_epoch", spy)
    return seen


def _run(manifest: Any, cfg: Any, run_dir: Path, remedy: str, **kw: Any) -> TrainSummary:
    req = train_request(manifest, cfg, run_dir, schedule="joint", epochs=3, seed=SEED, **kw)
    req = dataclasses.replace(req, train_config=dataclasses.replace(req.train_config, remedy=remedy))
    summary = run_training(req)
    assert summary is not None  # one process: rank 0
    return summary


def test_meda_restores_seed_tables_and_empty_table_optimizer_each_epoch_keeping_dense(
    tmp_path: Path, manifest, model_config, epoch_starts
) -> None:  # type: ignore[no-untyped-def]
    summary = _run(manifest, model_config, tmp_path / "run", "meda")
    init = _seed_init_tables(model_config, SEED)

    assert [s["epoch"] for s in epoch_starts] == [1, 2, 3]
    for start in epoch_starts:
        tables, dense = _split(start["model"])
        assert _equal(tables, init), f"epoch {start['epoch']}: tables are not the seed's init"
        assert all(not v.any() for v in start["table_optimizer"].values()), start["epoch"]
        if start["epoch"] > 1:
            previous = epoch_state(tmp_path / "run", start["epoch"] - 1)
            before_tables, before_dense = _split(previous["model"])
            assert _equal(dense, before_dense), "dense layers did not carry over unchanged"
            # the previous epoch did train the tables and fill the optimizer state
            assert not _equal(before_tables, init)
            assert any(v.any() for v in previous["table_optimizer"].values())
    assert summary.remedy == "meda"
    assert [e.remedy.name for e in summary.epochs if e.remedy] == ["meda"] * 3


def test_without_a_remedy_the_tables_carry_over(tmp_path: Path, manifest, model_config, epoch_starts) -> None:  # type: ignore[no-untyped-def]
    _run(manifest, model_config, tmp_path / "run", "none")
    init = _seed_init_tables(model_config, SEED)
    tables_1, _ = _split(epoch_starts[0]["model"])
    tables_2, _ = _split(epoch_starts[1]["model"])
    assert _equal(tables_1, init)  # from scratch: the seed's init
    assert not _equal(tables_2, init)
    epoch_1 = epoch_state(tmp_path / "run", 1)
    assert _equal(tables_2, _split(epoch_1["model"])[0])


def test_meda_replaces_a_warm_started_table_and_keeps_its_dense_layers(
    tmp_path: Path, manifest, model_config, trained, epoch_starts
) -> None:  # type: ignore[no-untyped-def]
    _run(manifest, model_config, tmp_path / "run", "meda", warm_start=trained / "model.pt")
    warm_tables, warm_dense = _split(load_checkpoint(trained / "model.pt")["model"])
    tables, dense = _split(epoch_starts[0]["model"])
    assert _equal(tables, _seed_init_tables(model_config, SEED))
    assert not _equal(warm_tables, tables)
    assert _equal(dense, warm_dense)


def test_unknown_remedy_is_a_config_error() -> None:
    from ranking.trainer.models.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match="remedy 'dropout'"):
        TrainConfig(schedule=("joint",), remedy="dropout")


def test_recipe_remedy_reaches_the_train_flag(tmp_path: Path) -> None:
    from ranking.cli.main import build_parser

    config = tmp_path / "ranker.toml"
    config.write_text('[recipe]\nremedy = "meda"\n')
    args = build_parser().parse_args(
        ["train", "--home", str(tmp_path), "--config", str(config), "--end", END.isoformat()]
    )
    assert args.remedy == "meda"
    assert args.pipeline_config.sources["recipe.remedy"].startswith("file:")


@pytest.mark.slow
def test_meda_under_two_gloo_processes(tmp_path: Path, window_home: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    """J,F with MEDA on 2 ranks: epoch 2 starts from the seed's tables with empty optimizer state
    and is frozen, so they must still be exactly that at its end."""
    cfg = tmp_path / "model_config.json"
    cfg.write_text(model_config.to_json())
    out = tmp_path / "two"
    proc = subprocess.run(
        ranker_cmd(
            "train",
            f"--home={window_home}",
            f"--end={END.isoformat()}",
            f"--days={DAYS}",
            "--schedule=J,F",
            "--remedy=meda",
            "--batch-size=256",
            "--warm-start=none",
            f"--seed={SEED}",
            f"--model-config={cfg}",
            f"--out={out}",
            "--nproc=2",
            "--no-register",
            "--no-progress",
            "--json",
        ),
        capture_output=True,
        text=True,
        timeout=600,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    assert summary["world_size"] == 2 and summary["remedy"] == "meda"
    assert {p.split("@")[1] for p in summary["sharding"].values()} == {"0", "1"}

    init = _seed_init_tables(model_config, SEED)
    epoch_1 = epoch_state(out, 1)
    epoch_2 = epoch_state(out, 2)
    assert not _equal(_split(epoch_1["model"])[0], init)
    assert any(v.any() for v in epoch_1["table_optimizer"].values())
    assert _equal(_split(epoch_2["model"])[0], init)
    assert all(not v.any() for v in epoch_2["table_optimizer"].values())
    # the dense optimizer carried over: its step count runs on across both epochs
    steps = [e["steps"] for e in summary["epochs"]]
    dense_steps = {int(s["step"]) for s in epoch_2["dense_optimizer"]["state"].values()}
    assert dense_steps == {sum(steps)}
