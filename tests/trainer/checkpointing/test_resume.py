"""Checkpoints: checksums, and --resume after a killed run ends with the uninterrupted model."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from ranking.trainer.checkpointing.checkpoint import (
    CheckpointError,
    checksum_path,
    epoch_checkpoint_path,
    latest_complete_checkpoint,
    load_checkpoint,
    verify_epoch,
)
from ranking.trainer.loop import run_training
from tests.trainer.conftest import DAYS, END, ranker_cmd, ranker_env, train_request


def test_checkpoint_checksum_detects_corruption_and_incomplete_writes(
    tmp_path: Path, manifest, model_config
) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "r"
    run_training(train_request(manifest, model_config, run_dir, schedule="joint", epochs=3))
    assert latest_complete_checkpoint(run_dir) == (3, epoch_checkpoint_path(run_dir, 3))
    # epoch 3: the sidecar never got written (killed before rank 0 finished the checkpoint)
    checksum_path(epoch_checkpoint_path(run_dir, 3)).unlink()
    # epoch 2: a flipped byte in one rank's shard file
    shard = sorted(epoch_checkpoint_path(run_dir, 2).glob("__0_*.distcp"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        verify_epoch(epoch_checkpoint_path(run_dir, 2))
    assert latest_complete_checkpoint(run_dir) == (1, epoch_checkpoint_path(run_dir, 1))
    # a file the sidecar does not list (a second writer, a stray copy): incomplete, not silently used
    (epoch_checkpoint_path(run_dir, 1) / "__9_0.distcp").write_bytes(b"stray")
    with pytest.raises(CheckpointError, match="incomplete"):
        verify_epoch(epoch_checkpoint_path(run_dir, 1))
    assert latest_complete_checkpoint(run_dir) is None


def test_checkpoint_metadata_with_foreign_objects_does_not_load(
    tmp_path: Path, manifest, model_config
) -> None:  # type: ignore[no-untyped-def]
    """DCP pickles its .metadata: only DCP's own records load (the weights_only rule)."""
    import pickle

    from ranking.trainer.checkpointing.state import tensor_specs

    run_dir = tmp_path / "r"
    run_training(train_request(manifest, model_config, run_dir, schedule="joint", epochs=1))
    folder = epoch_checkpoint_path(run_dir, 1)
    assert any(k.startswith("table_optimizer.") for k in tensor_specs(folder))
    (folder / ".metadata").write_bytes(pickle.dumps({"x": Path("/etc")}))
    with pytest.raises(CheckpointError, match=r"pathlib|refusing|not a tensor|unreadable"):
        tensor_specs(folder)
    (folder / ".metadata").write_bytes(pickle.dumps(subprocess.Popen))
    with pytest.raises(CheckpointError, match=r"subprocess\.Popen: refusing"):
        tensor_specs(folder)


def test_checkpoints_refuse_pickled_code(tmp_path: Path) -> None:
    """weights_only=True: a checkpoint carrying arbitrary objects does not load."""
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "obj": Path("/etc")}, path)
    with pytest.raises(CheckpointError, match="cannot load"):
        load_checkpoint(path)


def _final_state(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "model.pt")["model"]


@pytest.mark.slow
def test_resume_after_kill_ends_with_the_uninterrupted_model(
    tmp_path: Path, window_home: Path, manifest, model_config, model_config_file: Path
) -> None:  # type: ignore[no-untyped-def]
    epochs = 6  # enough left after epoch 1 for the kill to land mid-run
    reference = run_training(
        train_request(manifest, model_config, tmp_path / "whole", schedule="delayed", epochs=epochs)
    )

    killed = tmp_path / "killed"
    args = [
        "train",
        "--home",
        str(window_home),
        "--end",
        END.isoformat(),
        "--days",
        str(DAYS),
        "--epochs",
        str(epochs),
        "--schedule",
        "delayed",
        "--batch-size",
        "256",
        "--shuffle-buffer",
        "1000",
        "--warm-start",
        "none",
        "--no-register",
        "--model-config",
        str(model_config_file),
        "--out",
        str(killed),
    ]
    proc = subprocess.Popen(
        ranker_cmd(*args), env=ranker_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    first = checksum_path(epoch_checkpoint_path(killed, 1))
    deadline = time.monotonic() + 240
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert first.exists(), "the run never completed epoch 1"
    assert not (killed / "model.pt").exists(), "the run finished before it could be killed"
    done, _ = latest_complete_checkpoint(killed) or (0, None)
    assert 1 <= done < epochs

    resumed = run_training(
        train_request(manifest, model_config, killed, schedule="delayed", epochs=epochs, resume=True)
    )
    assert reference is not None and resumed is not None
    assert resumed.resumed_after_epoch == done
    want, got = _final_state(tmp_path / "whole"), _final_state(killed)
    assert want.keys() == got.keys()
    for key in want:
        assert torch.equal(want[key], got[key]), key
    assert [e.loss for e in resumed.epochs] == [e.loss for e in reference.epochs]


def test_resume_refuses_a_run_with_other_settings(tmp_path: Path, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    run_training(train_request(manifest, model_config, tmp_path / "r", schedule="joint", epochs=1))
    with pytest.raises(CheckpointError, match="another train_config"):
        run_training(
            train_request(manifest, model_config, tmp_path / "r", schedule="joint", epochs=2, resume=True)
        )
