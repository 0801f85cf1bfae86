"""A retrain's metrics reach a real Prometheus through a real Pushgateway, and every Grafana panel
query and every alert expression is run against Prometheus's HTTP API on them.

Starts ``prometheus-pushgateway`` and ``prometheus`` (Debian packages; infra/ci/install-servers.sh)
on free ports with temporary data folders, using the repository's prometheus.yml and alert rules
(targets rewritten to the local ports, 1 s scrape/evaluation). Skips when a binary is missing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from monitoring_fixtures import (
    INFRA,
    binary,
    free_port,
    http_get_json,
    prom_query,
    wait_http_ok,
    write_contract_run,
)

from ranking import monitoring as m
from ranking.workspace import Workspace

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PUSHGATEWAY_BIN = binary("prometheus-pushgateway") or binary("pushgateway")
PROMETHEUS_BIN = binary("prometheus")
DASHBOARD = json.loads((INFRA / "grafana/dashboards/ranker-retrain.json").read_text())
RULES = yaml.safe_load((INFRA / "prometheus/rules/ranker.rules.yml").read_text())
# alerts the published history must trigger (see published_history) — the rest must stay quiet
EXPECTED_ALERTS = {
    "RankerTrainingDurationRegression",
    "RankerEmbeddingLookupRatioHigh",
    "RankerStaleFeatures",
}
# series the Pushgateway adds to every pushed group
PUSHGATEWAY_SERIES = {"push_time_seconds", "push_failure_time_seconds"}


@dataclass
class Servers:
    pushgateway: str
    prometheus: str


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_config(pushgateway_port: int, prometheus_port: int) -> dict:
    """The repository's prometheus.yml with local targets and 1 s intervals."""
    config = yaml.safe_load((INFRA / "prometheus/prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [str(INFRA / "prometheus" / pattern) for pattern in config["rule_files"]]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    jobs["pushgateway"]["static_configs"] = [{"targets": [f"127.0.0.1:{pushgateway_port}"]}]
    jobs["prometheus"]["static_configs"] = [{"targets": [f"127.0.0.1:{prometheus_port}"]}]
    del jobs["statsd-exporter"]  # no Airflow here: its panels are checked in test_monitoring_statsd
    config["scrape_configs"] = list(jobs.values())
    return config


test_config.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    missing = [
        n for n, b in (("prometheus-pushgateway", PUSHGATEWAY_BIN), ("prometheus", PROMETHEUS_BIN)) if not b
    ]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian packages; run infra/ci/install-servers.sh)")
    assert PUSHGATEWAY_BIN and PROMETHEUS_BIN
    tmp = tmp_path_factory.mktemp("servers")
    pg_port, prom_port = free_port(), free_port()
    config_file = tmp / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(test_config(pg_port, prom_port)))
    procs: list[subprocess.Popen[bytes]] = []
    logs = {name: open(tmp / f"{name}.log", "wb") for name in ("pushgateway", "prometheus")}  # noqa: SIM115
    try:
        procs.append(
            subprocess.Popen(
                [
                    PUSHGATEWAY_BIN,
                    f"--web.listen-address=127.0.0.1:{pg_port}",
                    f"--persistence.file={tmp / 'pushgateway.data'}",
                ],
                stdout=logs["pushgateway"],
                stderr=subprocess.STDOUT,
            )
        )
        wait_http_ok(f"http://127.0.0.1:{pg_port}/-/ready", procs[-1], "pushgateway")
        procs.append(
            subprocess.Popen(
                [
                    PROMETHEUS_BIN,
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={tmp / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                stdout=logs["prometheus"],
                stderr=subprocess.STDOUT,
            )
        )
        wait_http_ok(f"http://127.0.0.1:{prom_port}/-/ready", procs[-1], "prometheus", timeout=60)
        yield Servers(f"http://127.0.0.1:{pg_port}", f"http://127.0.0.1:{prom_port}")
    finally:
        for proc in reversed(procs):
            _stop(proc)
        for f in logs.values():
            f.close()


@dataclass
class Published:
    result: m.PublishResult
    servers: Servers


@pytest.fixture(scope="module")
def published(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """Two daily runs pushed to the Pushgateway, then scraped by Prometheus.

    Day 1 promotes. Day 2 is a bad day on purpose: the gate rejects, training takes 2.5x day 1
    (duration regression), the joint epochs leave 40% of step time in exposed lookups, and the
    newest source data is a month old (stale features) — so both quiet and firing alerts are
    exercised on real data.
    """
    ws = Workspace(tmp_path_factory.mktemp("ws") / "home")
    push = m.PushConfig(url=servers.pushgateway, attempts=2, backoff_seconds=0.2)
    write_contract_run(ws, "day1", train_seconds=100.0)
    first = m.publish(ws, "day1", push=push)
    assert first.delivery == "pushgateway", first.push
    write_contract_run(
        ws, "day2", decision="reject", train_seconds=250.0, joint_exposed=0.4, latest_source_date="2026-10-01"
    )
    result = m.publish(ws, "day2", push=push)
    assert result.delivery == "pushgateway", result.push
    assert not m.textfile_path(ws).exists()  # pushed: no textfile fallback

    published_at = next(s.value for s in result.samples if s.name == "ranker_last_run_timestamp_seconds")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        data = prom_query(servers.prometheus, "ranker_last_run_timestamp_seconds")
        if data["result"] and math.isclose(float(data["result"][0]["value"][1]), published_at):
            break
        time.sleep(0.2)
    else:
        pytest.fail("Prometheus did not scrape the second run from the Pushgateway within 30 s")
    time.sleep(1.5)  # one more scrape: every series of the group has the new values
    return Published(result, servers)


# --------------------------------------------------------------------------------------------
# expressions and their selectors
# --------------------------------------------------------------------------------------------


def panel_exprs() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in DASHBOARD["panels"] for t in p.get("targets", [])]


def alert_exprs() -> list[tuple[str, str]]:
    return [(r["alert"], r["expr"]) for g in RULES["groups"] for r in g["rules"] if "alert" in r]


_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def selectors(expr: str) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """(selector text, metric name, label matchers) of every ranker/Pushgateway series in expr."""
    quoted = [mm.span() for mm in re.finditer(r'"[^"]*"', expr)]
    out = []
    for match in _SELECTOR.finditer(expr):
        if any(a <= match.start() < b for a, b in quoted):
            continue
        name = match.group(1)
        if name in m.CATALOGUE or name in PUSHGATEWAY_SERIES:
            out.append((match.group(0).strip(), name, _MATCHER.findall(match.group(2) or "")))
    return out


def matches(labels: dict[str, str], matchers: list[tuple[str, str, str]]) -> bool:
    for key, op, value in matchers:
        actual = labels.get(key, "")
        ok = {
            "=": actual == value,
            "!=": actual != value,
            "=~": re.fullmatch(value, actual) is not None,
            "!~": re.fullmatch(value, actual) is None,
        }[op]
        if not ok:
            return False
    return True


def expected_series(samples: list[m.Sample], name: str, matchers) -> dict[tuple, float]:
    out = {}
    for s in samples:
        labels = dict(s.labels)
        if s.name == name and matches({**labels, "job": m.DEFAULT_JOB}, matchers):
            out[tuple(sorted(labels.items()))] = s.value
    return out


def scraped_series(base: str, selector: str) -> dict[tuple, float]:
    out = {}
    for series in prom_query(base, selector)["result"]:
        metric = dict(series["metric"])
        assert metric.pop("job") == m.DEFAULT_JOB, f"{selector}: honor_labels must keep the pushed job label"
        assert "exported_job" not in metric
        for extra in ("__name__", "instance"):
            metric.pop(extra, None)
        out[tuple(sorted(metric.items()))] = float(series["value"][1])
    return out


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


ALL_EXPRS = [("panel", w, e) for w, e in panel_exprs()] + [("alert", w, e) for w, e in alert_exprs()]
RANKER_EXPRS = [x for x in ALL_EXPRS if selectors(x[2])]


def test_every_expression_is_covered() -> None:
    # every alert and every panel but the Airflow ones reads ranker (or Pushgateway) series
    uncovered = [(k, w) for k, w, e in ALL_EXPRS if not selectors(e) and "airflow_" not in e]
    assert uncovered == []
    assert len([x for x in RANKER_EXPRS if x[0] == "alert"]) == len(alert_exprs())


@pytest.mark.parametrize(
    ("kind", "where", "expr"), RANKER_EXPRS, ids=[f"{k}:{w}:{e[:40]}" for k, w, e in RANKER_EXPRS]
)
def test_every_series_an_expression_reads_holds_the_runs_values(
    published: Published, kind: str, where: str, expr: str
) -> None:
    for selector, name, matchers in selectors(expr):
        got = scraped_series(published.servers.prometheus, selector)
        assert got, f"{kind} {where!r}: {selector} returned nothing from Prometheus"
        if name in PUSHGATEWAY_SERIES:
            continue
        want = expected_series(published.result.samples, name, matchers)
        assert set(got) == set(want), f"{kind} {where!r}: {selector} label sets differ"
        for labels, value in want.items():
            assert same(got[labels], value), (
                f"{kind} {where!r}: {selector}{dict(labels)} {got[labels]} != {value}"
            )


@pytest.mark.parametrize(("where", "expr"), panel_exprs(), ids=[f"{w}:{e[:40]}" for w, e in panel_exprs()])
def test_every_panel_query_runs_and_ranker_panels_return_data(
    published: Published, where: str, expr: str
) -> None:
    data = prom_query(published.servers.prometheus, expr)  # raises on a query error
    if "airflow_" not in expr:  # Airflow panels: names checked against the statsd mapping instead
        assert data["result"], f"panel {where!r}: {expr} returned no data"


def test_alert_expressions_return_exactly_the_runs_problems(published: Published) -> None:
    firing = {
        alert for alert, expr in alert_exprs() if prom_query(published.servers.prometheus, expr)["result"]
    }
    assert firing == EXPECTED_ALERTS


def test_alert_values_are_the_runs_values(published: Published) -> None:
    base = published.servers.prometheus
    rules = dict(alert_exprs())
    [duration] = prom_query(base, rules["RankerTrainingDurationRegression"])["result"]
    assert float(duration["value"][1]) == 250.0 and duration["metric"]["stage"] == "train"
    [lookup] = prom_query(base, rules["RankerEmbeddingLookupRatioHigh"])["result"]
    assert lookup["metric"]["phase"] == "joint" and math.isclose(float(lookup["value"][1]), 0.4)
    [stale] = prom_query(base, rules["RankerStaleFeatures"])["result"]
    source_end = dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp()  # end of the newest source day
    assert abs(float(stale["value"][1]) - (time.time() - source_end)) < 120


def test_prometheus_loads_the_rules_and_raises_the_expected_alerts(published: Published) -> None:
    base = published.servers.prometheus
    rules = http_get_json(f"{base}/api/v1/rules")["data"]["groups"]
    loaded = {r["name"] for g in rules for r in g["rules"] if r["type"] == "alerting"}
    assert loaded == {a for a, _ in alert_exprs()}
    assert all(r.get("health") == "ok" for g in rules for r in g["rules"]), rules
    deadline = time.monotonic() + 20
    active: set[str] = set()
    while time.monotonic() < deadline:
        alerts = http_get_json(f"{base}/api/v1/alerts")["data"]["alerts"]
        active = {a["labels"]["alertname"] for a in alerts if a["state"] in ("pending", "firing")}
        if active == EXPECTED_ALERTS:
            break
        time.sleep(0.5)
    assert active == EXPECTED_ALERTS


def test_pushgateway_group_is_keyed_by_job_only(published: Published) -> None:
    groups = http_get_json(f"{published.servers.pushgateway}/api/v1/metrics")["data"]
    assert [g["labels"] for g in groups] == [{"job": m.DEFAULT_JOB}]


def test_a_failed_run_replaces_the_group_and_fires_the_failure_alert(
    published: Published, tmp_path: Path
) -> None:
    """Runs last (file order): reuses the servers with a separate workspace."""
    ws = Workspace(tmp_path / "home")
    push = m.PushConfig(url=published.servers.pushgateway, attempts=1)
    write_contract_run(ws, "ok")
    m.publish(ws, "ok", push=push)
    result = m.publish(ws, "broken", status="failed", failed_step="train", push=push)
    assert result.delivery == "pushgateway"
    base = published.servers.prometheus
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if prom_query(base, dict(alert_exprs())["RankerRetrainFailed"])["result"]:
            break
        time.sleep(0.2)
    else:
        pytest.fail("RankerRetrainFailed did not evaluate to the failed run")
    got = scraped_series(base, "ranker_run_failures_total")
    assert got[(("step", "train"),)] == 1.0
    # the PUT replaced the whole group: no series of the previous run's training remain
    time.sleep(1.5)
    assert prom_query(base, "ranker_train_epochs")["result"] == []
