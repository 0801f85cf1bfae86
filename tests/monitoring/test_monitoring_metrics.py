"""Mapping of step summaries to metrics, persistent counters, delivery and the CLI."""

from __future__ import annotations

import http.server
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from monitoring_fixtures import free_port, write_contract_run, write_summary

from ranking.cli.main import main
from ranking.core.workspace import Workspace
from ranking.monitoring import metrics as m

NOW = 1_796_000_000.0  # 2026-11-29T..Z, fixed for determinism
DAY = 86400.0


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "home")


def values(result: m.PublishResult) -> dict[str, float]:
    return {s.key: s.value for s in result.samples}


def publish(ws: Workspace, run_id: str, now: float = NOW, **kw) -> dict[str, float]:
    return values(m.publish(ws, run_id, now=now, **kw))


# --------------------------------------------------------------------------------------------
# mapping
# --------------------------------------------------------------------------------------------


def test_contract_run_maps_every_documented_field(ws: Workspace) -> None:
    write_contract_run(ws, "r1", train_seconds=100.0, joint_exposed=0.08)
    v = publish(ws, "r1")

    assert v["ranker_last_run_timestamp_seconds"] == NOW
    assert v["ranker_last_success_timestamp_seconds"] == NOW
    assert "ranker_last_failure_timestamp_seconds" not in v
    assert v['ranker_last_run_status{status="success"}'] == 1
    assert v['ranker_last_run_status{status="failed"}'] == 0
    assert v["ranker_last_run_promoted"] == 1
    # stages and the whole run (sum of stages without a 'run' summary)
    assert v['ranker_stage_duration_seconds{stage="train"}'] == 100.0
    assert v['ranker_stage_duration_seconds{stage="window"}'] == 12.5
    assert v['ranker_stage_duration_seconds{stage="gate"}'] == 3.25
    assert v['ranker_stage_duration_seconds{stage="materialize"}'] == 4.0
    assert v["ranker_run_duration_seconds"] == pytest.approx(100 + 12.5 + 3.25 + 4.0)
    assert not any(k.startswith("ranker_stage_duration_baseline_seconds") for k in v)  # first run
    # training
    assert v['ranker_train_info{pipeline="semisync",schedule="delayed"}'] == 1
    assert v["ranker_train_epochs"] == 3
    assert v["ranker_train_samples_per_second"] == 4300.0
    assert v['ranker_train_epoch_loss{epoch="2",phase="joint"}'] == 0.118
    assert v['ranker_train_epoch_samples_per_second{epoch="1",phase="frozen"}'] == 5000.0
    assert v['ranker_train_epoch_duration_seconds{epoch="3",phase="joint"}'] == pytest.approx(35.0)
    # lookup share by phase: duration-weighted over the phase's epochs
    assert v['ranker_embedding_lookup_ratio{phase="frozen"}'] == pytest.approx(0.18)
    assert v['ranker_embedding_lookup_ratio{phase="joint"}'] == pytest.approx(0.31)
    assert v['ranker_embedding_lookup_exposed_ratio{phase="joint"}'] == pytest.approx(0.08)
    # candidate and champion from the gate
    assert v['ranker_eval_save_hit_at_3_ratio{model="candidate"}'] == 0.41
    assert v['ranker_eval_save_hit_at_3_ratio{model="champion"}'] == 0.405
    assert v['ranker_eval_auc_ratio{model="champion"}'] == 0.735
    assert v['ranker_eval_normalized_entropy{model="candidate"}'] == 0.93
    # gate
    assert v["ranker_gate_passed"] == 1
    assert v['ranker_gate_check_passed{check="save_hit_at_3_change"}'] == 1
    assert v['ranker_gate_check_value{check="save_hit_at_3_floor"}'] == 0.41
    assert v['ranker_gate_check_threshold{check="save_hit_at_3_floor"}'] == 0.05
    # a [low, high] threshold is not a single number: no series rather than a wrong one
    assert 'ranker_gate_check_threshold{check="calibration"}' not in v
    assert 'ranker_gate_check_value{check="calibration"}' in v
    assert v["ranker_gate_relative_change"] == 0.0125
    assert v["ranker_gate_relative_change_ci_lower"] == -0.004
    assert v["ranker_gate_relative_change_ci_upper"] == 0.03
    assert v["ranker_gate_consecutive_rejections"] == 0
    assert v['ranker_promotions_total{forced="false"}'] == 1
    assert v['ranker_promotions_total{forced="true"}'] == 0
    assert v["ranker_rejections_total"] == 0
    assert v["ranker_last_promotion_timestamp_seconds"] == NOW
    # data
    assert v['ranker_window_rows{split="train"}'] == 200_000
    assert v['ranker_window_rows{split="eval"}'] == 10_000
    assert v["ranker_window_length_days"] == 20
    assert v['ranker_window_days{state="built"}'] == 1
    assert v['ranker_window_days{state="reused"}'] == 19
    assert v["ranker_window_label_rate_ratio"] == 0.031
    assert v["ranker_window_end_timestamp_seconds"] == 1_796_083_200.0  # 2026-12-01T00:00Z
    assert v["ranker_feature_freshness_lag_seconds"] == 7200.0
    assert v["ranker_feature_source_end_timestamp_seconds"] == 1_796_083_200.0  # end of 2026-11-30
    assert v["ranker_materialize_end_timestamp_seconds"] == 1_796_083_200.0
    # counters start at zero for every label value (no missing series before the first event)
    assert v['ranker_runs_total{status="success"}'] == 1
    assert v['ranker_runs_total{status="failed"}'] == 0
    assert all(v[f'ranker_run_failures_total{{step="{s}"}}'] == 0 for s in m.KNOWN_STEPS)
    assert v["ranker_metrics_push_failures_total"] == 0


def test_catalogue_follows_prometheus_naming() -> None:
    for name, spec in m.CATALOGUE.items():
        assert name.startswith("ranker_") and name == spec.name
        assert re_match(r"^[a-z_][a-z0-9_]*$", name)
        assert name.endswith("_total") == (spec.kind == "counter"), name
        # no run or version ids as labels: they would create a new series every day
        assert not {"run_id", "run", "version", "model_version"} & set(spec.labels), name
        assert not re_match(r".*_(ms|milliseconds|minutes|hours|percent)$", name), name
        assert spec.help


def re_match(pattern: str, text: str) -> bool:
    import re

    return re.match(pattern, text) is not None


def test_ratio_series_are_between_0_and_1_and_labels_are_bounded(ws: Workspace) -> None:
    write_contract_run(ws, "r1")
    result = m.publish(ws, "r1", now=NOW)
    for s in result.samples:
        if s.name.endswith("_ratio"):
            assert 0.0 <= s.value <= 1.0, s.key
        labels = dict(s.labels)
        if "phase" in labels:
            assert labels["phase"] in m.PHASES
        if "model" in labels:
            assert labels["model"] in m.MODELS
        if "status" in labels:
            assert labels["status"] in m.STATUSES


def test_sync_pipeline_exposes_every_lookup(ws: Workspace) -> None:
    write_summary(
        ws,
        "r1",
        "train",
        {
            "pipeline": "sync",
            "schedule": "joint",
            "epochs": [{"epoch": 1, "phase": "joint", "lookup_ratio": 0.2, "duration_seconds": 3.0}],
        },
    )
    v = publish(ws, "r1")
    assert v['ranker_embedding_lookup_exposed_ratio{phase="joint"}'] == pytest.approx(0.2)
    assert 'ranker_embedding_lookup_ratio{phase="frozen"}' not in v  # no frozen epoch ran


def test_candidate_falls_back_to_train_eval_without_gate(ws: Workspace) -> None:
    write_summary(ws, "r1", "train", {"eval": {"save_hit_at_3": 0.3, "auc": 0.7, "ne": 0.95}})
    v = publish(ws, "r1")
    assert v['ranker_eval_save_hit_at_3_ratio{model="candidate"}'] == 0.3
    assert not any('model="champion"' in k for k in v)
    assert "ranker_gate_passed" not in v


def test_the_run_summary_gives_the_run_duration(ws: Workspace) -> None:
    write_contract_run(ws, "r1")
    write_summary(ws, "r1", "run", {"duration_seconds": 222.0, "decision": "pass"})
    v = publish(ws, "r1")
    assert v["ranker_run_duration_seconds"] == 222.0
    assert 'ranker_stage_duration_seconds{stage="run"}' not in v


# --------------------------------------------------------------------------------------------
# persistent state across runs (each CLI call is a fresh process)
# --------------------------------------------------------------------------------------------


def test_counters_keep_counting_across_runs_and_republishing_does_not_double_count(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    write_contract_run(ws, "d2", decision="reject")
    write_contract_run(ws, "d3", decision="reject")
    publish(ws, "d1", now=NOW)
    publish(ws, "d2", now=NOW + DAY)
    v = publish(ws, "d3", now=NOW + 2 * DAY)
    assert v['ranker_runs_total{status="success"}'] == 3
    assert v['ranker_promotions_total{forced="false"}'] == 1
    assert v["ranker_rejections_total"] == 2
    assert v["ranker_gate_consecutive_rejections"] == 2
    assert v["ranker_last_promotion_timestamp_seconds"] == NOW
    assert v["ranker_gate_passed"] == 0
    assert v['ranker_gate_check_passed{check="save_hit_at_3_change"}'] == 0
    assert v["ranker_last_run_promoted"] == 0

    again = publish(ws, "d3", now=NOW + 2 * DAY + 60)  # an Airflow retry of the publish task
    assert again['ranker_runs_total{status="success"}'] == 3
    assert again["ranker_rejections_total"] == 2
    assert again["ranker_gate_consecutive_rejections"] == 2
    assert again["ranker_last_run_timestamp_seconds"] == NOW + 2 * DAY + 60

    write_contract_run(ws, "d4")
    v = publish(ws, "d4", now=NOW + 3 * DAY)
    assert v["ranker_gate_consecutive_rejections"] == 0
    assert v['ranker_promotions_total{forced="false"}'] == 2


def test_forced_promotion_and_noop_promotion(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")
    write_summary(ws, "d1", "promote", {"version": "v-d1", "forced": True, "noop": False})
    v = publish(ws, "d1")
    assert v['ranker_promotions_total{forced="true"}'] == 1
    assert v["ranker_rejections_total"] == 1  # the gate did reject it
    assert v["ranker_gate_consecutive_rejections"] == 0  # but the champion moved
    assert v["ranker_last_run_promoted"] == 1

    write_contract_run(ws, "d2")
    write_summary(ws, "d2", "promote", {"version": "v-d1", "forced": False, "noop": True})
    v = publish(ws, "d2", now=NOW + DAY)
    assert v["ranker_last_run_promoted"] == 0
    assert v['ranker_promotions_total{forced="false"}'] == 0
    assert v["ranker_last_promotion_timestamp_seconds"] == NOW


def test_duration_baseline_is_the_median_of_previous_runs(ws: Workspace) -> None:
    for i, secs in enumerate([100.0, 120.0, 110.0]):
        write_contract_run(ws, f"d{i}", train_seconds=secs)
        v = publish(ws, f"d{i}", now=NOW + i * DAY)
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 110.0  # median(100, 120)
    write_contract_run(ws, "d3", train_seconds=400.0)
    v = publish(ws, "d3", now=NOW + 3 * DAY)
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 110.0  # median(100, 120, 110)
    assert v['ranker_stage_duration_seconds{stage="train"}'] == 400.0
    v = publish(ws, "d3", now=NOW + 3 * DAY + 5)  # republishing excludes the run from its baseline
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 110.0


def test_baseline_window_keeps_the_latest_runs_only(ws: Workspace) -> None:
    for i in range(m.DURATION_HISTORY + 3):
        write_contract_run(ws, f"d{i}", train_seconds=1000.0 if i < 3 else 10.0)
        v = publish(ws, f"d{i}", now=NOW + i * DAY)
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 10.0


# --------------------------------------------------------------------------------------------
# failed runs
# --------------------------------------------------------------------------------------------


def test_failed_run_keeps_last_success_and_counts_the_failed_step(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    publish(ws, "d1", now=NOW)
    write_summary(ws, "d2", "window", {"rows_train": 10, "duration_seconds": 1.0})
    v = publish(ws, "d2", now=NOW + DAY, status="failed", failed_step="train")
    assert v['ranker_last_run_status{status="failed"}'] == 1
    assert v['ranker_last_run_status{status="success"}'] == 0
    assert v["ranker_last_success_timestamp_seconds"] == NOW
    assert v["ranker_last_failure_timestamp_seconds"] == NOW + DAY
    assert v['ranker_run_failures_total{step="train"}'] == 1
    assert v['ranker_runs_total{status="failed"}'] == 1
    assert v['ranker_runs_total{status="success"}'] == 1
    # the newest source-data fact survives a run that did not check freshness
    assert v["ranker_feature_source_end_timestamp_seconds"] == 1_796_083_200.0
    assert v["ranker_last_run_promoted"] == 0


def test_run_that_failed_before_any_step_is_publishable_only_as_failed(ws: Workspace) -> None:
    with pytest.raises(m.MetricsInputError, match="no step summaries"):
        m.publish(ws, "empty", now=NOW)
    v = publish(ws, "empty", status="failed", failed_step="freshness-check")
    assert v['ranker_run_failures_total{step="other"}'] == 1  # unknown step: bounded label


def test_an_errored_step_summary_marks_the_run_failed(ws: Workspace) -> None:
    # what `ranker run` records when a step raises a RankerError
    write_summary(ws, "d1", "window", {"duration_seconds": 2.0})
    write_summary(ws, "d1", "train", {"error": "training loss is NaN"}, exit_code=2)
    result = m.publish(ws, "d1", now=NOW)
    assert result.status == "failed" and result.failed_step == "train"
    v = values(result)
    assert v['ranker_run_failures_total{step="train"}'] == 1
    assert "ranker_gate_passed" not in v


def test_failure_records_from_callbacks_mark_the_run_failed(ws: Workspace) -> None:
    write_summary(ws, "d1", "window", {"duration_seconds": 2.0})
    m.record_failure(ws, "d1", "gate", "boom", now=NOW + 5)
    m.record_failure(ws, "d1", "train", "OOM", now=NOW + 1)  # the earliest failure is the cause
    result = m.publish(ws, "d1", now=NOW + 10)
    assert (result.status, result.failed_step) == ("failed", "train")


def test_gate_rejection_is_not_a_failure(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")  # gate exit code 1
    assert m.publish(ws, "d1", now=NOW).status == "success"


# --------------------------------------------------------------------------------------------
# bad input: clear errors naming the problem
# --------------------------------------------------------------------------------------------


def test_unreadable_summary_names_the_file(ws: Workspace) -> None:
    path = ws.step_summary_path("d1", "train")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(m.MetricsInputError, match=r"train\.json"):
        m.publish(ws, "d1", now=NOW)


@pytest.mark.parametrize(
    ("step", "body", "message"),
    [
        ("window", {"rows_train": "many"}, "'rows_train' must be a number"),
        ("train", {"epochs": [{"epoch": 1, "phase": "warm"}]}, "phase must be one of"),
        ("train", {"epochs": [{"epoch": "one", "phase": "joint"}]}, "epoch must be an integer"),
        ("train", {"epochs": {"1": {}}}, "'epochs' must be a list"),
        ("gate", {"decision": "maybe"}, "decision must be"),
        ("gate", {"checks": [{"name": 'bad"label'}]}, "not a safe label value"),
        ("gate", {"checks": [{"name": "a"}, {"name": "a"}]}, "duplicate check name"),
        ("gate", {"ci": [0.1]}, "ci must be"),
        ("train", {"schedule": "F J J"}, "schedule"),
        ("window", {"end": "yesterday"}, "not an ISO date"),
        ("window", [1, 2], "expected a JSON object"),
    ],
)
def test_malformed_fields_raise_clear_errors(ws: Workspace, step: str, body, message: str) -> None:
    path = ws.step_summary_path("d1", step)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(body))
    with pytest.raises(m.MetricsInputError, match=message):
        m.publish(ws, "d1", now=NOW)
    assert not m.state_path(ws).exists()  # nothing half-updated
    assert not m.textfile_path(ws).exists()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://pg:9091",
        "pushgateway:9091",
        "http://",
        "http://u:p@pg:9091",
        "http://pg:9091/?x=1",
        "http://pg:99999",
        "http://pg:9091/a b",
    ],
)
def test_bad_pushgateway_urls_are_rejected(url: str) -> None:
    with pytest.raises(m.RankerError, match="invalid Pushgateway URL"):
        m.validate_pushgateway_url(url)


def test_nan_metric_values_pass_through(ws: Workspace) -> None:
    write_summary(ws, "d1", "train", {"eval": {"save_hit_at_3": float("nan"), "auc": 0.5, "ne": 1.0}})
    v = publish(ws, "d1")
    assert math.isnan(v['ranker_eval_save_hit_at_3_ratio{model="candidate"}'])


# --------------------------------------------------------------------------------------------
# delivery
# --------------------------------------------------------------------------------------------


def test_textfile_is_written_atomically_and_parses_back(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    result = m.publish(ws, "d1", now=NOW)
    assert result.delivery == "textfile"
    text = m.textfile_path(ws).read_text()
    assert m.parse_exposition(text) == pytest.approx(values(result))
    assert "_created" not in text  # each CLI call is a new process: creation times would lie
    assert sorted(p.name for p in ws.metrics.iterdir()) == [".state.lock", "ranker.prom", "state.json"]


def test_custom_textfile_path(ws: Workspace, tmp_path: Path) -> None:
    write_contract_run(ws, "d1")
    target = tmp_path / "node-exporter" / "ranker.prom"
    result = m.publish(ws, "d1", now=NOW, textfile=target)
    assert result.target == str(target) and target.exists()


def test_unreachable_pushgateway_falls_back_to_textfile_and_counts(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    waits: list[float] = []
    config = m.PushConfig(
        url=f"http://127.0.0.1:{free_port()}", attempts=3, backoff_seconds=0.5, timeout_seconds=2
    )
    result = m.publish(ws, "d1", now=NOW, push=config, sleep=waits.append)
    assert result.delivery == "textfile"
    assert result.push is not None and not result.push.ok and result.push.attempts == 3
    assert "Connection refused" in (result.push.error or "")
    assert waits == [0.5, 1.0]  # exponential backoff between the 3 attempts
    on_disk = m.parse_exposition(m.textfile_path(ws).read_text())
    assert on_disk["ranker_metrics_push_failures_total"] == 1
    # the count persists: the next publish carries it too
    write_contract_run(ws, "d2")
    assert publish(ws, "d2", now=NOW + DAY)["ranker_metrics_push_failures_total"] == 1


class _Status500(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_PUT(self) -> None:
        _Status500.requests.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_gateway() -> Iterator[str]:
    _Status500.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Status500)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_pushgateway_errors_are_retried_then_fall_back(ws: Workspace, failing_gateway: str) -> None:
    write_contract_run(ws, "d1")
    config = m.PushConfig(url=failing_gateway, attempts=2, backoff_seconds=0)
    result = m.publish(ws, "d1", now=NOW, push=config, sleep=lambda _: None)
    assert _Status500.requests == ["/metrics/job/ranker_retrain"] * 2  # grouped by job only
    assert result.delivery == "textfile" and "500" in (result.push.error or "")


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def test_cli_publish_and_show(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(m.PUSHGATEWAY_ENV, raising=False)
    write_contract_run(ws, "d1")
    assert main(["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["delivery"] == "textfile" and summary["status"] == "success"
    assert summary["step"] == "metrics"
    # the publish records its own summary, which is not a stage of the run
    assert ws.step_summary_path("d1", "metrics").exists()
    assert main(["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--json"]) == 0
    capsys.readouterr()
    text = m.textfile_path(ws).read_text()
    assert 'stage="metrics"' not in text

    assert main(["metrics", "show", "--home", str(ws.root)]) == 0
    assert "ranker_last_run_timestamp_seconds" in capsys.readouterr().out
    assert main(["metrics", "show", "--home", str(ws.root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run_id"] == "d1" and shown["series"]["ranker_train_epochs"] == 3


def test_cli_uses_the_env_pushgateway_and_survives_its_failure(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(m.PUSHGATEWAY_ENV, f"http://127.0.0.1:{free_port()}")
    write_contract_run(ws, "d1")
    argv = ["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--json", "--push-attempts", "1"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["push_ok"] is False and summary["delivery"] == "textfile"
    # an explicit empty --pushgateway means "none configured"
    assert main([*argv, "--pushgateway", ""]) == 0
    assert json.loads(capsys.readouterr().out)["push_ok"] is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "needs --run-id"),
        (
            ["--run-id", "d1", "--status", "success", "--failed-step", "train"],
            "only goes with --status failed",
        ),
        (["--run-id", "d1", "--pushgateway", "pushgateway:9091"], "invalid Pushgateway URL"),
        (["--run-id", "d1", "--job", "bad job"], "invalid job name"),
        (["--run-id", "d1", "--textfile", "/tmp/x.txt"], "must be a path ending in .prom"),
    ],
)
def test_cli_bad_arguments_exit_2(
    ws: Workspace, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    write_contract_run(ws, "d1")
    assert main(["metrics", "publish", "--home", str(ws.root), *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_show_before_any_publish(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "show", "--home", str(ws.root)]) == 2
    assert "no metrics published yet" in capsys.readouterr().err


def test_the_failing_step_is_the_earliest_in_the_pipeline_not_the_run_summary(ws: Workspace) -> None:
    write_summary(ws, "d1", "window", {"duration_seconds": 2.0})
    write_summary(ws, "d1", "gate", {"error": "no eval scores"}, exit_code=2)
    write_summary(ws, "d1", "run", {"error": "step gate failed", "duration_seconds": 9.0}, exit_code=2)
    result = m.publish(ws, "d1", now=NOW)
    assert (result.status, result.failed_step) == ("failed", "gate")


def test_a_failed_earlier_publish_does_not_fail_the_run(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    write_summary(ws, "d1", "metrics", {"error": "state file unreadable"}, exit_code=2)
    assert m.publish(ws, "d1", now=NOW).status == "success"


def test_unwritable_textfile_is_a_clear_error_and_leaves_the_state_untouched(
    ws: Workspace, tmp_path: Path
) -> None:
    write_contract_run(ws, "d1")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(m.RankerError, match="cannot write the metrics textfile"):
        m.publish(ws, "d1", now=NOW, textfile=blocker / "ranker.prom")
    assert not m.state_path(ws).exists()  # not counted: a retry counts the run once


def _publish_in_process(home: str, run_id: str) -> str:
    return m.publish(Workspace(Path(home)), run_id).status


def test_concurrent_publishes_of_one_workspace_count_every_run(ws: Workspace) -> None:
    import multiprocessing

    runs = [f"d{i}" for i in range(6)]
    for run_id in runs:
        write_contract_run(ws, run_id)
    with multiprocessing.get_context("spawn").Pool(len(runs)) as pool:
        statuses = pool.starmap(_publish_in_process, [(str(ws.root), r) for r in runs])
    assert statuses == ["success"] * len(runs)
    state = m.load_state(ws)
    assert state.runs_total["success"] == len(runs)  # no lost update between processes
    assert state.promotions_total["false"] == len(runs)
    assert set(state.counted) == set(runs)
