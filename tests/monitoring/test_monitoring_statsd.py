"""The statsd-exporter mapping matches the metric names Airflow 3 actually emits.

Airflow ships the list of its metrics (``metrics_template.yaml``, with the dotted "legacy" names
that plain statsd receives); every mapping rule must match at least one of them, and the names the
dashboard queries must be produced by a rule.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from monitoring_fixtures import INFRA, REPO

MAPPING = yaml.safe_load((INFRA / "statsd/mapping.yml").read_text())
TEMPLATE = next(
    iter(
        sorted(
            (REPO / ".venv-airflow/lib").glob(
                "python3*/site-packages/airflow/_shared/observability/metrics/metrics_template.yaml"
            )
        )
    ),
    None,
)
SAMPLE = {
    "dag_id": "ranker_retrain",
    "task_id": "train",
    "state": "success",
    "pool_name": "training",
    "executor_class_name": "LocalExecutor",
    "queue": "default",
    "file_name": "ranker_retrain.py",
    "bundle_name": "dags-folder",
    "job_id": "7",
    "return_code": "0",
    "hostname": "host",
}


def airflow_statsd_names() -> list[str]:
    if TEMPLATE is None:
        pytest.skip("Airflow's metrics_template.yaml not found (.venv-airflow not installed)")
    names = []
    for metric in yaml.safe_load(TEMPLATE.read_text())["metrics"]:
        for name in (metric["name"], metric.get("legacy_name")):
            if name and name != "-":
                try:
                    names.append("airflow." + name.format(**SAMPLE))
                except KeyError:
                    continue  # a variable we have no sample for (operator names, ...)
    return names


def glob_regex(pattern: str) -> re.Pattern[str]:
    # statsd_exporter glob: '*' matches one dot-separated component
    return re.compile("^" + r"([^.]+)".join(re.escape(p) for p in pattern.split("*")) + "$")


def rule_regex(rule: dict) -> re.Pattern[str]:
    if rule.get("match_type", MAPPING["defaults"]["match_type"]) == "regex":
        return re.compile(rule["match"])
    return glob_regex(rule["match"])


def mapped(name: str) -> tuple[str, dict[str, str]] | None:
    """What statsd-exporter makes of a statsd name: (prometheus name, labels), first match wins."""
    for rule in MAPPING["mappings"]:
        match = rule_regex(rule).match(name)
        if match:

            def sub(text: str, match: re.Match[str] = match) -> str:
                return re.sub(r"\$\{?(\d+)\}?", lambda g: match.group(int(g.group(1))), text)

            return sub(rule["name"]), {k: sub(v) for k, v in rule.get("labels", {}).items()}
    return None


def test_every_rule_matches_a_metric_airflow_emits() -> None:
    names = airflow_statsd_names()
    for rule in MAPPING["mappings"]:
        regex = rule_regex(rule)
        assert any(regex.match(n) for n in names), f"mapping {rule['match']!r} matches no Airflow metric"


@pytest.mark.parametrize(
    ("statsd_name", "prom_name", "labels"),
    [
        (
            "airflow.dagrun.duration.success.ranker_retrain",
            "airflow_dagrun_duration_seconds",
            {"dag_id": "ranker_retrain", "state": "success"},
        ),
        (
            "airflow.dagrun.duration.failed.ranker_retrain",
            "airflow_dagrun_duration_seconds",
            {"dag_id": "ranker_retrain", "state": "failed"},
        ),
        (
            "airflow.dag.ranker_retrain.train.duration",
            "airflow_task_duration_seconds",
            {"dag_id": "ranker_retrain", "task_id": "train"},
        ),
        (
            "airflow.ti.finish.ranker_retrain.gate.failed",
            "airflow_task_finish_total",
            {"dag_id": "ranker_retrain", "task_id": "gate", "state": "failed"},
        ),
        ("airflow.pool.open_slots.training", "airflow_pool_open_slots", {"pool": "training"}),
        (
            "airflow.dag_processing.last_duration.dags-folder.ranker_retrain.py",
            "airflow_dag_processing_last_duration_seconds",
            {"bundle": "dags-folder", "file": "ranker_retrain.py"},
        ),
    ],
)
def test_key_airflow_metrics_get_names_and_labels(statsd_name: str, prom_name: str, labels: dict) -> None:
    assert mapped(statsd_name) == (prom_name, labels)


def test_one_name_always_has_the_same_label_names() -> None:
    # statsd-exporter refuses a metric whose label names differ from an earlier one of that name
    seen: dict[str, set[str]] = {}
    for rule in MAPPING["mappings"]:
        labels = set(rule.get("labels", {}))
        assert seen.setdefault(rule["name"], labels) == labels, rule["name"]


def test_dashboard_airflow_queries_use_mapped_names() -> None:
    dashboard = json.loads((INFRA / "grafana/dashboards/ranker-retrain.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    produced = {rule["name"] for rule in MAPPING["mappings"]}
    used = {n for e in exprs for n in re.findall(r"\bairflow_[a-z0-9_]+", e)}
    assert used, "the dashboard has Airflow panels"
    for name in used:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert base in produced, f"dashboard queries {name}, which no statsd mapping produces"


def test_statsd_settings_of_compose_point_at_the_exporter() -> None:
    compose = yaml.safe_load(Path(REPO / "docker-compose.yml").read_text())
    env = compose["x-airflow-common"]["environment"]
    assert env["AIRFLOW__METRICS__STATSD_ON"] == "True"
    assert env["AIRFLOW__METRICS__STATSD_HOST"] == "statsd-exporter"
    assert env["AIRFLOW__METRICS__STATSD_PREFIX"] == "airflow"
    exporter = compose["services"]["statsd-exporter"]
    assert any("mapping" in str(a) for a in exporter["command"])
