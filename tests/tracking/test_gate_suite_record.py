"""`ranker backtest --inject` (the gate suite) is one run of ranker-backtest: per recipe and gate,
the regret against the oracle and against always promoting, what it served, the staleness, and
how many planted bad candidates it promoted; the kinds it stopped as tags; the report as artifacts."""

from __future__ import annotations

from pathlib import Path

from mlflow import MlflowClient

from ranking.backtest.gates import Regret
from ranking.backtest.suite import GateBrief, SuiteSummary
from ranking.backtest.tracking import suite_record, track_suite
from ranking.tracking.builders import BACKTEST_EXPERIMENT


def _regret(vs_oracle: float | None, served: float | None) -> Regret:
    return Regret(
        days=4,
        served_mean=served,
        oracle_mean=0.4,
        always_promote_mean=0.3,
        regret_vs_oracle=vs_oracle,
        vs_always_promote=0.05,
        clean_days=3,
        vs_always_promote_clean_days=0.01,
        staleness_median_days=1,
        staleness_max_days=2,
        rejected_a_better_candidate=1,
        rejected_a_better_candidate_sizes=[0.03],
        promoted_a_worse_one=0,
        promoted_a_worse_one_sizes=[],
    )


def _summary(tmp_path: Path) -> SuiteSummary:
    report = tmp_path / "report.md"
    report.write_text("# gate suite\n")
    return SuiteSummary(
        backtest_dir=str(tmp_path),
        recipes={
            "naive": {
                "report": {"markdown": str(report), "missing": str(tmp_path / "gone.json")},
                "default": GateBrief(
                    regret=_regret(0.02, 0.38), stopped={"shuffled_labels": "1/1"}, bad_promoted=0
                ),
                "no_gate": GateBrief(regret=_regret(None, 0.31), stopped={}, bad_promoted=2),
            }
        },
    )


def test_the_suite_record_has_each_gates_figures(tmp_path: Path) -> None:
    record = suite_record(_summary(tmp_path), "bt1", ["shuffled_labels@2026-01-05", "lr_x100@2026-01-06"])
    assert (record.record_id, record.experiment) == ("gate-suite:bt1", BACKTEST_EXPERIMENT)
    metrics = {m.key: m.value for m in record.metrics}
    assert metrics["naive.default.regret_vs_oracle"] == 0.02
    assert metrics["naive.default.bad_promoted"] == 0.0 and metrics["naive.no_gate.bad_promoted"] == 2.0
    assert "naive.no_gate.regret_vs_oracle" not in metrics  # no value: no point, not a 0
    assert metrics["naive.default.rejected_a_better"] == 1.0
    assert record.tags["ranker.stopped.naive.default"] == "shuffled_labels 1/1"
    assert "ranker.stopped.naive.no_gate" not in record.tags
    assert record.params["injections"] == "shuffled_labels@2026-01-05, lr_x100@2026-01-06"


def test_track_suite_logs_one_run_with_the_report(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ranking.core.workspace import Workspace

    monkeypatch.delenv("RANKER_MLFLOW_TRACKING_URI", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    ref = track_suite(Workspace.resolve(home), None, _summary(tmp_path), "bt1", ["all"], started=1.0)
    assert ref is not None and ref.run_id and not ref.queued
    client = MlflowClient(f"sqlite:///{home.resolve()}/mlflow/mlflow.db")
    run = client.get_run(ref.run_id)
    assert run.data.tags["ranker.record_id"] == "gate-suite:bt1"
    assert [a.path for a in client.list_artifacts(ref.run_id)] == ["report.md"]  # the file that exists
