"""Static checks of the dashboard and alert rules against the metric catalogue (no servers).
The integration test runs the same queries against a real Prometheus."""

from __future__ import annotations

import json
import re

import yaml
from monitoring_fixtures import INFRA

from ranking.monitoring.catalogue import CATALOGUE

DASHBOARD = json.loads((INFRA / "grafana/dashboards/ranker-retrain.json").read_text())
RULES = yaml.safe_load((INFRA / "prometheus/rules/ranker.rules.yml").read_text())
DATASOURCE = yaml.safe_load((INFRA / "grafana/provisioning/datasources/prometheus.yml").read_text())
PUSHGATEWAY_SERIES = {"push_time_seconds", "push_failure_time_seconds"}


def panel_exprs() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in DASHBOARD["panels"] for t in p.get("targets", [])]


def alert_exprs() -> list[tuple[str, str]]:
    return [(r["alert"], r["expr"]) for g in RULES["groups"] for r in g["rules"] if "alert" in r]


def ranker_names(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', '""', expr)  # job="ranker_retrain" is not a metric
    return set(re.findall(r"\branker_[a-z0-9_]+", without_strings))


def test_every_queried_ranker_metric_is_in_the_catalogue() -> None:
    for where, expr in panel_exprs() + alert_exprs():
        for name in ranker_names(expr):
            assert name in CATALOGUE, f"{where}: {name} is not a metric of ranking/monitoring/catalogue.py"


def test_panels_use_the_provisioned_datasource_and_have_unique_ids() -> None:
    uid = DATASOURCE["datasources"][0]["uid"]
    panels = DASHBOARD["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == uid, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == uid
            assert "$" not in t["expr"], f"{p['title']}: template variables are not resolvable in tests"


def test_dashboard_covers_what_on_call_needs() -> None:
    used = {n for _, e in panel_exprs() for n in ranker_names(e)}
    for name in (
        "ranker_last_run_status",
        "ranker_last_run_promoted",
        "ranker_gate_check_passed",
        "ranker_eval_save_hit_at_3_ratio",
        "ranker_embedding_lookup_ratio",
        "ranker_embedding_lookup_exposed_ratio",
        "ranker_stage_duration_seconds",
        "ranker_train_samples_per_second",
        "ranker_promotions_total",
        "ranker_rejections_total",
    ):
        assert name in used, f"no panel shows {name}"


def test_panels_fit_the_grid() -> None:
    for p in DASHBOARD["panels"]:
        pos = p["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, p["title"]


def test_every_metric_and_alert_is_documented() -> None:
    docs = (INFRA.parent / "docs/monitoring.md").read_text()
    for name in CATALOGUE:
        assert f"| `{name}` |" in docs, f"{name} is not in docs/monitoring.md"
    for alert, _ in alert_exprs():
        assert f"`{alert}`" in docs, f"{alert} is not in docs/monitoring.md"
