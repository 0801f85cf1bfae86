"""curve.png from the per-step curve (training_curve.json) and from per-epoch data only."""

from __future__ import annotations

from typing import Any

import pytest

from ranking.core.summaries import EpochSummary, EvalSummary
from ranking.trainer.reports.curve_data import CurveRecorder, TrainingCurve
from ranking.trainer.reports.plots import curve_figure, epoch_spans


def _epochs() -> list[EpochSummary]:
    return [
        EpochSummary.model_construct(
            epoch=e, phase=phase, loss=loss, eval=EvalSummary.model_construct(save_hit_at_3=hit)
        )
        for e, phase, loss, hit in (
            (1, "frozen", 0.31, 0.36),
            (2, "joint", 0.27, 0.38),
            (3, "joint", 0.25, 0.39),
        )
    ]


def _curve(steps: int = 10, every: int = 3) -> TrainingCurve:
    recorder = CurveRecorder(every)
    for epoch, phase in ((1, "frozen"), (2, "joint"), (3, "joint")):
        recorder.start_epoch(epoch, phase)
        for i in range(steps):
            recorder.add(0.35 - 0.01 * epoch - 0.002 * i, 100)
        recorder.end_epoch()
    return recorder.curve()


def _labelled(fig: Any) -> dict[str, Any]:
    return {str(h.get_label()): h for h in fig.axes[-1].get_legend().legend_handles}


def test_the_per_step_curve_draws_every_point_with_phases_and_epoch_boundaries() -> None:
    import matplotlib.pyplot as plt

    curve = _curve()
    assert len(curve.points) == 12  # 4 per epoch: 3 steps x 3, the epoch's last step alone
    fig = curve_figure(_epochs(), curve=curve, champion_metric=0.37, champion_version="v0001")
    try:
        loss_axis, metric_axis = fig.axes
        (loss_line,) = [line for line in loss_axis.get_lines() if line.get_label().startswith("train loss")]
        xs, ys = loss_line.get_data()
        assert len(ys) == len(curve.points)
        assert list(ys) == pytest.approx([p.loss for p in curve.points])
        assert list(xs) == sorted(xs) and xs[-1] == pytest.approx(3.0) and 0 < xs[0] < 1
        assert loss_line.get_linewidth() < 1.5  # thin
        # epochs end at x = 1, 2 (dotted), the F/J letters over each epoch, the frozen one shaded
        bounds = [line.get_xdata()[0] for line in loss_axis.get_lines() if line.get_linestyle() == ":"]
        assert bounds == [1, 2]
        assert [t.get_text() for t in loss_axis.texts] == ["F", "J", "J"]
        assert len(loss_axis.patches) == 1
        # the eval metric per epoch at each epoch's end, the champion line, one legend of all
        (hits,) = [line for line in metric_axis.get_lines() if line.get_label() == "eval save_hit_at_3"]
        assert list(hits.get_xdata()) == [1, 2, 3]
        assert set(_labelled(fig)) == {
            "train loss (mean of 3 steps)",
            "epoch end",
            "eval save_hit_at_3",
            "champion v0001 0.3700",
        }
    finally:
        plt.close(fig)


def test_without_the_file_the_curve_is_drawn_from_the_epochs() -> None:
    import matplotlib.pyplot as plt

    fig = curve_figure(_epochs())
    try:
        loss_axis = fig.axes[0]
        (loss_line,) = [line for line in loss_axis.get_lines() if line.get_label().startswith("train loss")]
        assert list(loss_line.get_xdata()) == [1, 2, 3]
        assert list(loss_line.get_ydata()) == pytest.approx([0.31, 0.27, 0.25])
        assert [t.get_text() for t in loss_axis.texts] == ["F", "J", "J"]
        assert "train loss (epoch mean)" in _labelled(fig)
        # an empty curve (a run killed in its first interval) is the same as none
        empty = curve_figure(_epochs(), curve=TrainingCurve(points=[], every_steps=1))
        assert [line.get_label() for line in empty.axes[0].get_lines()] == [loss_line.get_label()]
        plt.close(empty)
    finally:
        plt.close(fig)


def test_a_curve_of_single_steps_says_so() -> None:
    import matplotlib.pyplot as plt

    fig = curve_figure(_epochs(), curve=_curve(steps=4, every=1))
    try:
        assert "train loss (per step)" in _labelled(fig)
    finally:
        plt.close(fig)


def test_epoch_spans_of_a_curve_that_lost_its_first_epochs() -> None:
    full = _curve()
    assert epoch_spans(full) == {1: (0, 10), 2: (10, 20), 3: (20, 30)}
    tail = TrainingCurve(points=[p for p in full.points if p.epoch == 3], every_steps=3)
    assert epoch_spans(tail) == {3: (20, 30)}
