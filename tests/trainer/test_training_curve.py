"""The trainer's per-step curve (training_curve.json) on a tiny run, and a resumed run keeping it."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from ranking.trainer.checkpointing.checkpoint import epoch_checkpoint_path
from ranking.trainer.loop import FINAL_CHECKPOINT, run_training
from ranking.trainer.reports.curve_data import read_training_curve
from tests.trainer.conftest import train_request


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory: pytest.TempPathFactory, manifest, model_config) -> Path:  # type: ignore[no-untyped-def]
    run_dir = tmp_path_factory.mktemp("curve") / "run"
    run_training(train_request(manifest, model_config, run_dir, schedule="F,J", epochs=2))
    return run_dir


def test_the_curve_has_points_within_each_epoch_with_increasing_steps_and_finite_losses(
    two_epochs: Path,
) -> None:
    from ranking.trainer.loop import TrainManifest

    curve = read_training_curve(two_epochs)
    assert curve is not None
    epochs = TrainManifest.read(two_epochs).epochs
    assert len(curve.points) > len(epochs)
    steps = [p.step for p in curve.points]
    assert steps == sorted(set(steps))
    assert all(math.isfinite(p.loss) and p.loss > 0 for p in curve.points)
    assert {p.phase for p in curve.points if p.epoch == 1} == {"F"}
    assert {p.phase for p in curve.points if p.epoch == 2} == {"J"}
    # each epoch ends on a point, at the run's step and sample counts
    for e in epochs:
        last = [p for p in curve.points if p.epoch == e.epoch][-1]
        assert last.step == sum(x.steps for x in epochs[: e.epoch])
        assert last.samples == sum(x.samples for x in epochs[: e.epoch])
    # each point averages its steps' losses by rows: together they give the epoch's loss
    before = 0
    for e in epochs:
        points = [p for p in curve.points if p.epoch == e.epoch]
        rows = [p.samples - q for p, q in zip(points, [before, *(p.samples for p in points)], strict=False)]
        assert sum(p.loss * r for p, r in zip(points, rows, strict=True)) / sum(rows) == pytest.approx(e.loss)
        before = points[-1].samples
    assert (two_epochs / "curve.png").stat().st_size > 0


def test_a_resumed_run_keeps_the_earlier_epochs_points(
    tmp_path: Path, two_epochs: Path, manifest, model_config
) -> None:  # type: ignore[no-untyped-def]
    full = read_training_curve(two_epochs)
    assert full is not None
    run_dir = tmp_path / "run"
    shutil.copytree(two_epochs, run_dir)
    # killed after epoch 2's curve was written, before its checkpoint completed
    shutil.rmtree(epoch_checkpoint_path(run_dir, 2))
    (run_dir / FINAL_CHECKPOINT).unlink()
    run_training(train_request(manifest, model_config, run_dir, schedule="F,J", epochs=2, resume=True))
    resumed = read_training_curve(run_dir)
    assert resumed is not None
    assert [(p.step, p.epoch, p.phase, p.samples) for p in resumed.points] == [
        (p.step, p.epoch, p.phase, p.samples) for p in full.points
    ]
    assert [p.loss for p in resumed.points] == pytest.approx([p.loss for p in full.points], rel=1e-4)
