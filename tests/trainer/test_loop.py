"""The training loop (run_training): warm start, frozen tables, non-finite loss, bad input."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from ranking.core.errors import DataValidationError, RankerError, TrainingFailed
from ranking.trainer.checkpointing.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ranking.trainer.loop import run_training
from tests.trainer.conftest import train_request


def test_warm_started_frozen_epoch_keeps_the_trained_table(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    run_training(train_request(manifest, model_config, tmp_path / "champion", schedule="joint", epochs=1))
    champion = load_checkpoint(tmp_path / "champion" / "model.pt")
    summary = run_training(
        train_request(
            manifest,
            model_config,
            tmp_path / "next",
            schedule="frozen",
            epochs=1,
            seed=4,
            warm_start=tmp_path / "champion" / "model.pt",
            warm_start_source="path",
        )
    )
    assert summary is not None and summary.warm_start.source == "path"
    after = load_checkpoint(tmp_path / "next" / "model.pt")["model"]
    tables = [k for k in after if "sparse_arch" in k]
    assert tables and all(torch.equal(after[k], champion["model"][k]) for k in tables)
    assert all(
        not torch.equal(after[k], champion["model"][k]) for k in after if k not in tables and "weight" in k
    )


def test_warm_start_with_another_architecture_is_refused(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    run_training(train_request(manifest, model_config, tmp_path / "a", schedule="joint", epochs=1))
    wider = dataclasses.replace(model_config, over_arch=(32, 8))
    with pytest.raises(CheckpointError, match="another architecture"):
        run_training(
            train_request(manifest, wider, tmp_path / "b", epochs=1, warm_start=tmp_path / "a" / "model.pt")
        )


def test_non_finite_loss_fails_the_run_without_a_final_checkpoint(
    tmp_path: Path, manifest, model_config
) -> None:  # type: ignore[no-untyped-def]
    run_training(train_request(manifest, model_config, tmp_path / "ok", schedule="joint", epochs=1))
    payload = load_checkpoint(tmp_path / "ok" / "model.pt")
    payload["model"]["head.bias"] = torch.tensor([float("nan")])  # a corrupted champion
    save_checkpoint(tmp_path / "nan.pt", payload)
    run_dir = tmp_path / "failed"
    with pytest.raises(TrainingFailed, match=r"non-finite loss \(nan\) at epoch 1 step 1"):
        run_training(train_request(manifest, model_config, run_dir, warm_start=tmp_path / "nan.pt"))
    assert not (run_dir / "model.pt").exists()
    assert not (run_dir / "checkpoints").exists()


def test_window_with_other_feature_definitions_fails_before_training(
    tmp_path: Path, manifest, model_config
) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "r"
    with pytest.raises(DataValidationError, match="built with feature definitions"):
        run_training(train_request(manifest, model_config, run_dir, expected_feature_version="features-v999"))
    assert not run_dir.exists()


def test_existing_run_folder_needs_resume(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    run_training(train_request(manifest, model_config, tmp_path / "r", schedule="joint", epochs=1))
    with pytest.raises(RankerError, match="already holds a run"):
        run_training(train_request(manifest, model_config, tmp_path / "r", schedule="joint", epochs=1))
