"""Curve plots an operator compares (fixed axes, labels, the champion line) and the run report."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from registry_fixtures import make_run as make_run  # a fixture
from summary_examples import example_summaries

from ranking.cli.main import main
from ranking.core.summaries import (
    CandidateMetrics,
    EpochSummary,
    EvalSummary,
    GateCheck,
    GateSummary,
    ModelMetrics,
    SliceSummary,
    TrainSummary,
    TrainWindow,
    WarmStart,
)
from ranking.trainer.reports.plots import AXIS_RANGES, CurveLabels, curve_figure
from ranking.trainer.reports.run_report import curve_labels, render_report


def _epochs(losses: list[float], hits: list[float]) -> list[EpochSummary]:
    """What the curve reads of each epoch (the rest left out: model_construct)."""
    return [
        EpochSummary.model_construct(
            epoch=i + 1,
            phase="frozen" if i == 0 else "joint",
            loss=loss,
            eval=EvalSummary.model_construct(save_hit_at_3=hit),
        )
        for i, (loss, hit) in enumerate(zip(losses, hits, strict=True))
    ]


# what the report reads of a train and a gate summary
TRAIN = TrainSummary.model_construct(
    run_dir="",
    version="v0002",
    schedule="F,J",
    pipeline="semisync",
    epochs=_epochs([0.31, 0.27], [0.361, 0.3851]),
    eval=EvalSummary.model_construct(save_hit_at_3=0.3851, auc=0.71, ne=0.93),
    window=TrainWindow.model_construct(
        end=dt.date(2026, 1, 25),
        eval_date=dt.date(2026, 1, 25),
        train_dates=[dt.date(2026, 1, 5), dt.date(2026, 1, 24)],
    ),
    warm_start=WarmStart.model_construct(source="base v0001", scope="all"),
)
GATE_FIELDS: dict[str, Any] = {
    "decision": "reject",
    "eval_date": "2026-01-25",
    "candidate": {"version": "v0002", "save_hit_at_3": 0.3851, "auc": 0.71, "ne": 0.93},
    "champion": {"version": "v0003", "save_hit_at_3": 0.3884, "auc": 0.72, "ne": 0.92},
    "relative_change": -0.0086,
    "ci": [-0.061, 0.042],
    "checks": [
        {"name": "min_save_hit_at_3", "passed": True, "value": 0.3851, "threshold": 0.0, "detail": "floor"},
        {
            "name": "save_hit_at_3_change",
            "passed": False,
            "value": -0.0086,
            "threshold": -0.05,
            "detail": "lower bound | below -5%",
        },
    ],
    "failed_checks": ["save_hit_at_3_change"],
}
GATE = GateSummary.model_construct(
    **GATE_FIELDS
    | {
        "candidate": CandidateMetrics.model_construct(**GATE_FIELDS["candidate"]),
        "champion": ModelMetrics.model_construct(**GATE_FIELDS["champion"]),
        "checks": [GateCheck(**c) for c in GATE_FIELDS["checks"]],
        "eval_date": dt.date(2026, 1, 25),
    }
)


def test_every_curve_uses_the_metrics_fixed_axis_ranges() -> None:
    import matplotlib.pyplot as plt

    low = curve_figure(_epochs([0.30, 0.28], [0.20, 0.22]))
    high = curve_figure(_epochs([0.12, 0.10], [0.41, 0.43]))
    try:
        for fig in (low, high):
            loss_axis, metric_axis = fig.axes
            assert loss_axis.get_ylim() == pytest.approx(AXIS_RANGES["loss"])
            assert metric_axis.get_ylim() == pytest.approx(AXIS_RANGES["save_hit_at_3"])
        # a value outside the range widens it, and the label says so
        odd = curve_figure(_epochs([1.3, 0.9], [0.3, 0.3]))
        assert odd.axes[0].get_ylim()[1] == pytest.approx(1.3)
        assert "range widened" in odd.axes[0].get_ylabel()
        plt.close(odd)
    finally:
        plt.close(low)
        plt.close(high)


def test_the_curve_names_version_run_window_and_day_and_draws_the_champion() -> None:
    import matplotlib.pyplot as plt

    labels = curve_labels(TRAIN, "manual__2026-01-26")
    assert labels == CurveLabels("v0002", "manual__2026-01-26", "2026-01-05..2026-01-24 (2 d)", "2026-01-25")
    fig = curve_figure(TRAIN.epochs, labels=labels, champion_metric=0.3884, champion_version="v0003")
    try:
        title = fig.axes[0].get_title()
        for part in (
            "version v0002",
            "run manual__2026-01-26",
            "window 2026-01-05..2026-01-24",
            "eval day 2026-01-25",
        ):
            assert part in title, title
        flat = [line for line in fig.axes[1].get_lines() if list(line.get_ydata()) == [0.3884, 0.3884]]
        assert len(flat) == 1 and "v0003" in flat[0].get_label()
    finally:
        plt.close(fig)


def test_the_report_has_the_recipe_the_comparison_and_the_gate_table() -> None:
    text = render_report(TRAIN, GATE, "manual__2026-01-26")
    assert text.startswith("# Run manual__2026-01-26: v0002, REJECTED by the gate\n")
    assert "warm start base v0001 (scope all)" in text and "schedule F,J, 2 epochs" in text
    assert "| save HIT@3 | 0.3851 | 0.3884 |" in text
    assert "Relative change of save HIT@3: -0.86% [-6.10%, +4.20%]" in text
    assert "## Gate: reject (failed: save_hit_at_3_change)" in text
    assert "| save_hit_at_3_change | **FAIL** | -0.0086 | -0.0500 | lower bound \\| below -5% |" in text
    assert "| min_save_hit_at_3 | pass | 0.3851 | 0.0000 | floor |" in text
    assert "![training curve](curve.png)" in text


def _workspace(tmp_path: Path, run_id: str, gate: bool) -> Path:
    home = tmp_path / "home"
    run_dir = home / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "train_manifest.json").write_text("{}")
    steps = home / "pipeline" / run_id
    steps.mkdir(parents=True)
    # what the steps record: complete summaries (the report reads them through their models)
    examples = example_summaries()
    train = examples["train"].model_dump(mode="json") | {"run_dir": str(run_dir)}
    (steps / "train.json").write_text(json.dumps(train))
    if gate:
        judged = examples["gate"].model_dump(mode="json")
        (steps / "gate.json").write_text(
            json.dumps(judged | {k: GATE_FIELDS[k] for k in ("decision", "checks", "failed_checks")})
        )
    return home


def test_ranker_report_writes_both_files_in_the_run_folder(tmp_path: Path) -> None:
    home = _workspace(tmp_path, "r1", gate=True)
    assert main(["report", "--run", "r1", "--home", str(home)]) == 0
    report = (home / "runs" / "r1" / "report.md").read_text()
    assert "REJECTED by the gate" in report and "| save_hit_at_3_change | **FAIL**" in report
    assert (home / "runs" / "r1" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the gate's slices (the example summary's two): a table row each and the plot beside it
    assert "## Slices" in report and "![slices](slices.png)" in report
    assert (
        "| user:first_seen | 61 | 0.3100 | 0.3300 | 0.3000 | -6.10% [-20.00%, +8.00%] | yes (p 0.21) |"
        in report
    )
    assert "| user_stats__country:other | 12 |" in report and report.count("| no |") == 1
    assert (home / "runs" / "r1" / "slices.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_slices_plot_draws_each_change_with_its_interval_and_the_guard() -> None:
    import matplotlib.pyplot as plt

    from ranking.trainer.reports.plots import slices_figure

    slices = [
        SliceSummary(
            name="user:first_seen",
            requests_with_save=61,
            candidate=None,
            relative_change=-0.3,
            ci=(-0.5, -0.1),
            judged=True,
        ),
        SliceSummary(
            name="pin:tail",
            requests_with_save=12,
            candidate=None,
            relative_change=0.05,
            ci=(-0.2, 0.3),
            judged=False,
        ),
    ]
    fig = slices_figure(slices, tolerance=0.1)
    try:
        ax = fig.axes[0]
        points = {
            tuple(line.get_xdata()): line.get_color() for line in ax.get_lines() if line.get_marker() == "o"
        }
        assert points == {(-0.3,): "black", (0.05,): "tab:gray"}  # judged in black
        assert [list(line.get_xdata()) for line in ax.get_lines() if line.get_linestyle() == "--"] == [
            [-0.1, -0.1]
        ]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["pin:tail (12)", "user:first_seen (61)"]
    finally:
        plt.close(fig)
    first_run = slices_figure(
        [SliceSummary(name="user:returning", requests_with_save=5, candidate=0.4, heuristic=0.3)],
        tolerance=None,
    )
    try:
        assert sorted(round(p.get_width(), 3) for p in first_run.axes[0].patches) == [0.3, 0.4]
    finally:
        plt.close(first_run)


def test_ranker_report_before_the_gate_and_on_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _workspace(tmp_path, "r2", gate=False)
    assert main(["report", "--run", "r2", "--home", str(home)]) == 0
    assert "not gated yet" in (home / "runs" / "r2" / "report.md").read_text()
    capsys.readouterr()
    (home / "pipeline" / "r2" / "train.json").write_text(json.dumps({"step": "train", "run_dir": "x"}))
    assert main(["report", "--run", "r2", "--home", str(home)]) == 2  # not a train summary
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a train summary" in err, err
    assert main(["report", "--run", "nope", "--home", str(home)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no train summary" in err, err
    with pytest.raises(SystemExit) as usage:  # a flag's bad value: a usage error, as argparse's
        main(["report", "--run", "../r2", "--home", str(home)])
    assert usage.value.code == 2 and "invalid run id" in capsys.readouterr().err


AIRFLOW_RUN_ID = "scheduled__2026-12-05T03:00:00+00:00"  # every scheduled run's id looks like this


def _title_inside(fig: Any) -> None:
    """The title's rendered extent lies inside the figure (as the PNG is written: no bbox cropping)."""
    renderer = fig.canvas.get_renderer()
    box = fig.axes[0].title.get_window_extent(renderer)
    width, height = fig.bbox.width, fig.bbox.height
    assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height, (box, width, height)


@pytest.mark.parametrize("run_id", [AIRFLOW_RUN_ID, "manual__" + "x" * 120])
def test_a_long_run_id_keeps_the_title_inside_the_figure(run_id: str) -> None:
    import matplotlib.pyplot as plt

    from ranking.trainer.reports.plots import slices_figure

    labels = curve_labels(TRAIN, run_id)
    curve = curve_figure(TRAIN.epochs, labels=labels, champion_metric=0.3884, champion_version="v0003")
    slices = slices_figure(
        [SliceSummary(name="user:returning", requests_with_save=5, candidate=0.4, heuristic=0.3)],
        tolerance=None,
        title=labels.title(),
    )
    try:
        for fig in (curve, slices):
            _title_inside(fig)
            title = fig.axes[0].get_title()
            # every character of the run id is still there, however it was wrapped
            assert run_id in title.replace("\n", ""), title
    finally:
        plt.close(curve)
        plt.close(slices)


def test_wrap_title_keeps_short_titles_on_one_line_and_breaks_long_parts() -> None:
    from ranking.trainer.reports.plots import wrap_title

    assert wrap_title("version v0002 | run r1") == "version v0002 | run r1"
    wrapped = wrap_title("version v0002 | run " + "y" * 100 + " | eval day 2026-01-25", width=40)
    assert all(len(line) <= 40 for line in wrapped.splitlines()), wrapped
    assert wrapped.replace("\n", "").replace(" | ", "") == (
        "version v0002run " + "y" * 100 + "eval day 2026-01-25"
    )


@pytest.mark.parametrize("champion", [None, 0.3884])
def test_every_curve_with_a_labelled_line_has_a_legend_of_them_all(champion: float | None) -> None:
    import matplotlib.pyplot as plt

    # day 1 has no champion: its curve has the loss and the eval metric, and a legend of both
    fig = curve_figure(TRAIN.epochs, champion_metric=champion, champion_version="v0003")
    try:
        labelled = [
            line.get_label()
            for ax in fig.axes
            for line in ax.get_lines()
            if not line.get_label().startswith("_")
        ]
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert len(legends) == 1
        assert [t.get_text() for t in legends[0].get_texts()] == labelled
        assert labelled[:2] == ["train loss (epoch mean)", "eval save_hit_at_3"] and len(labelled) == (
            2 if champion is None else 3
        )
    finally:
        plt.close(fig)


def test_small_thresholds_and_values_read_right_in_the_gate_table() -> None:
    check = GateCheck(
        name="scores_not_constant", passed=True, value=3.2e-07, threshold=1e-06, detail="score std"
    )
    text = render_report(TRAIN, GATE.model_copy(update={"checks": [check]}), "r1")
    assert "| scores_not_constant | pass | 3.2e-07 | 1e-06 | score std |" in text, text
    assert "0.0000" not in text.split("## Gate", 1)[1]


def test_a_base_models_report_says_what_a_base_is_and_counts_one_epoch() -> None:
    one_epoch = TRAIN.model_copy(update={"epochs": TRAIN.epochs[:1]})
    text = render_report(one_epoch, None, "pretrain-1", base=True)
    header = text.splitlines()[0]
    assert header == "# Run pretrain-1: v0002, a base model (not gated: a base is not a daily candidate)"
    assert "not gated yet" not in text and ", 1 epoch," in text and "1 epochs" not in text
    assert ", 2 epochs," in render_report(TRAIN, None, "r1")


def test_ranker_report_knows_a_base_run_by_its_pretrain_summary_or_the_registry(
    tmp_path: Path,
    make_run: Any,
) -> None:
    from ranking.registry import Registry

    home = _workspace(tmp_path, "pt", gate=False)
    (home / "pipeline" / "pt" / "pretrain.json").write_text(json.dumps({"step": "pretrain"}))
    assert main(["report", "--run", "pt", "--home", str(home)]) == 0
    assert "a base model (not gated" in (home / "runs" / "pt" / "report.md").read_text()

    # `ranker run`'s first base records no pretrain summary: the registry's base history says
    home = _workspace(tmp_path / "run", "first-pretrain", gate=False)
    reg = Registry(str(home / "registry"))
    version = reg.register(make_run())
    train_json = home / "pipeline" / "first-pretrain" / "train.json"
    train_json.write_text(json.dumps(json.loads(train_json.read_text()) | {"version": version}))
    assert main(["report", "--run", "first-pretrain", "--home", str(home)]) == 0
    report = home / "runs" / "first-pretrain" / "report.md"
    assert "not gated yet" in report.read_text()  # a daily candidate, until the base points at it
    reg.set_base(version, reason="pretrained")
    assert main(["report", "--run", "first-pretrain", "--home", str(home)]) == 0
    assert "a base model (not gated" in report.read_text()


def test_ranker_report_draws_the_runs_per_step_curve_and_survives_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ranking.trainer.reports import plots
    from ranking.trainer.reports.curve_data import TRAINING_CURVE_FILE, CurveRecorder, write_training_curve

    home = _workspace(tmp_path, "r3", gate=True)
    run_dir = home / "runs" / "r3"
    recorder = CurveRecorder(every_steps=2)
    for epoch, phase in ((1, "frozen"), (2, "joint")):
        recorder.start_epoch(epoch, phase)
        for _ in range(5):
            recorder.add(0.3, 64)
        recorder.end_epoch()
    write_training_curve(run_dir, recorder.curve())
    drawn: list[Any] = []
    real = plots.plot_curve
    monkeypatch.setattr(plots, "plot_curve", lambda *a, **kw: drawn.append(kw["curve"]) or real(*a, **kw))
    assert main(["report", "--run", "r3", "--home", str(home)]) == 0
    assert drawn == [recorder.curve()]
    # a torn or foreign file: the report is still written, from the per-epoch losses
    (run_dir / TRAINING_CURVE_FILE).write_text("{")
    (run_dir / "report.md").unlink()
    assert main(["report", "--run", "r3", "--home", str(home)]) == 0
    assert drawn[-1] is None and (run_dir / "report.md").is_file()
    assert any("is not a training curve" in m for m in caplog.messages)
