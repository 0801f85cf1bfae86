"""training_curve.json: the recorder's points, the file round trip and a resumed run's points."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranking.core.errors import RankerError
from ranking.trainer.reports.curve_data import (
    TRAINING_CURVE_FILE,
    CurveRecorder,
    every_steps_for,
    read_training_curve,
    write_training_curve,
)


def _two_epochs(recorder: CurveRecorder, steps: int = 7, rows: int = 10) -> None:
    for epoch, phase in ((1, "frozen"), (2, "joint")):
        recorder.start_epoch(epoch, phase)
        for i in range(steps):
            recorder.add(0.5 - 0.01 * i, rows)
        recorder.end_epoch()


def test_points_are_row_weighted_means_over_every_steps_and_each_epoch_ends_on_one() -> None:
    recorder = CurveRecorder(every_steps=3)
    recorder.start_epoch(1, "frozen")
    for loss, rows in ((0.6, 10), (0.3, 20), (0.0, 10), (0.4, 5)):
        recorder.add(loss, rows)
    recorder.end_epoch()
    curve = recorder.curve()
    assert [(p.step, p.epoch, p.phase, p.samples) for p in curve.points] == [(3, 1, "F", 40), (4, 1, "F", 45)]
    assert curve.points[0].loss == pytest.approx((0.6 * 10 + 0.3 * 20) / 40)
    assert curve.points[1].loss == pytest.approx(0.4)


def test_every_steps_aims_at_tens_of_points_per_epoch() -> None:
    assert every_steps_for(4) == 1
    assert every_steps_for(1000) == 20
    assert 40 <= 1000 / every_steps_for(1000) <= 60


def test_the_file_round_trips_and_is_absent_before_a_run(tmp_path: Path) -> None:
    assert read_training_curve(tmp_path) is None
    recorder = CurveRecorder(every_steps=2)
    _two_epochs(recorder)
    write_training_curve(tmp_path, recorder.curve())
    assert read_training_curve(tmp_path) == recorder.curve()
    (tmp_path / TRAINING_CURVE_FILE).write_text('{"points": 3}')
    with pytest.raises(RankerError, match="is not a training curve"):
        read_training_curve(tmp_path)


def test_a_resumed_recorder_keeps_the_checkpointed_epochs_points_only(tmp_path: Path) -> None:
    full = CurveRecorder(every_steps=2)
    _two_epochs(full)
    write_training_curve(tmp_path, full.curve())  # epoch 2 written, but the checkpoint holds epoch 1
    resumed = CurveRecorder.resumed(tmp_path, after_epoch=1, steps=7, samples=70, every_steps=99)
    assert resumed.every_steps == 2  # the file's spacing, not a new one
    assert [p.epoch for p in resumed.points] == [1] * 4
    resumed.start_epoch(2, "joint")
    for i in range(7):
        resumed.add(0.5 - 0.01 * i, 10)
    resumed.end_epoch()
    assert resumed.curve() == full.curve()
    # without the file, the steps still count from the run's start
    lost = CurveRecorder.resumed(tmp_path / "none", after_epoch=1, steps=7, samples=70, every_steps=3)
    lost.start_epoch(2, "joint")
    lost.add(0.4, 10)
    lost.end_epoch()
    assert [(p.step, p.samples) for p in lost.points] == [(8, 80)]
