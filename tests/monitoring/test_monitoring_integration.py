"""A retrain's metrics reach a real Prometheus through a real Pushgateway, and every Grafana panel
query and every alert expression is run against Prometheus's HTTP API on them.

Two scenarios on the same servers, in file order:
1. a real tiny retrain: synthetic source data (features.testing), Feast apply, then for two days
   the DAG's steps through the `ranker` CLI (freshness, `ranker run` = window/train/gate/
   promote|reject/publish, then publish again as the DAG's final task does) with
   $RANKER_PUSHGATEWAY_URL set — every series a panel or an alert reads must hold exactly the
   values the run pushed;
2. a constructed "bad day" (step summaries written from the documented contract) that must raise
   exactly the alerts its numbers call for, in the expressions and in Prometheus's own evaluation.

Starts ``prometheus-pushgateway`` and ``prometheus`` (Debian packages; infra/ci/install-servers.sh)
on free ports with temporary data folders, using the repository's prometheus.yml and alert rules
(targets rewritten to the local ports, 1 s scrape/evaluation). Skips when a binary is missing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_fixtures import (
    INFRA,
    binary,
    free_port,
    http_get_json,
    prom_query,
    wait_for_another_scrape,
    wait_http_ok,
    write_contract_run,
)

from features.testing import make_tiny_workspace
from ranking.core.workspace import Workspace
from ranking.monitoring.catalogue import CATALOGUE
from ranking.monitoring.delivery import DEFAULT_JOB, PushConfig, textfile_path
from ranking.monitoring.publish import publish
from ranking.monitoring.samples import Sample
from ranking.monitoring.state import load_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PUSHGATEWAY_BIN = binary("prometheus-pushgateway") or binary("pushgateway")
PROMETHEUS_BIN = binary("prometheus")
DASHBOARD = json.loads((INFRA / "grafana/dashboards/ranker-retrain.json").read_text())
RULES = yaml.safe_load((INFRA / "prometheus/rules/ranker.rules.yml").read_text())
RANKER = Path(sys.executable).with_name("ranker")
# alerts the constructed bad day must trigger (see bad_day) — the rest must stay quiet
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
        wait_http_ok(f"http://127.0.0.1:{pg_port}/-/ready", procs[-1], "pushgateway", timeout=120)
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
        wait_http_ok(f"http://127.0.0.1:{prom_port}/-/ready", procs[-1], "prometheus", timeout=120)
        yield Servers(f"http://127.0.0.1:{pg_port}", f"http://127.0.0.1:{prom_port}")
    finally:
        for proc in reversed(procs):
            _stop(proc)
        for f in logs.values():
            f.close()


@dataclass
class Published:
    samples: list[Sample]  # exactly what the last publish pushed
    servers: Servers
    runs: tuple[dict[str, Any], ...] = ()  # the `ranker run` summaries, in order
    job: str = DEFAULT_JOB  # the Pushgateway group the samples were pushed to


def wait_for_scrape(servers: Servers, samples: list[Sample]) -> None:
    """Until Prometheus has scraped the pushed group (its last-run time), plus one more scrape."""
    published_at = next(s.value for s in samples if s.name == "ranker_last_run_timestamp_seconds")
    deadline = time.monotonic() + 90  # generous: the machine is shared
    while time.monotonic() < deadline:
        data = prom_query(servers.prometheus, "ranker_last_run_timestamp_seconds")
        if data["result"] and math.isclose(float(data["result"][0]["value"][1]), published_at):
            break
        time.sleep(0.2)
    else:
        pytest.fail("Prometheus did not scrape the published run from the Pushgateway within 90 s")
    wait_for_another_scrape(servers.prometheus)  # every series of the group has the new values


def pushed_samples(ws: Workspace) -> list[Sample]:
    """The samples of the workspace's last publish (the exposition it pushed)."""
    from prometheus_client.parser import text_string_to_metric_families

    last = load_state(ws).last_publish
    assert last["delivery"] == "pushgateway", last
    return [
        Sample(s.name, s.value, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(last["exposition"])
        for s in family.samples
    ]


def ranker_cli(home: Path, pushgateway: str, *args: str, ok: tuple[int, ...] = (0,)) -> dict:
    env = {**os.environ, "RANKER_HOME": str(home), "RANKER_PUSHGATEWAY_URL": pushgateway}
    env.pop("RANKER_REGISTRY", None)
    proc = subprocess.run(
        [str(RANKER), *args, "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode in ok, f"ranker {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def real_retrain(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """Two daily retrains of a tiny synthetic workspace, through the real CLI steps.

    Day 1 has no champion; it runs with --force-promote so that day 2 surely has a champion to
    be compared with (recorded as forced only if the gate would have rejected it).
    """
    home = tmp_path_factory.mktemp("retrain") / "home"
    cli = lambda *a, **kw: ranker_cli(home, servers.pushgateway, *a, **kw)  # noqa: E731
    make_tiny_workspace(home, start=dt.date(2026, 11, 1), days=6, requests_per_day=100, seed=7, build=False)
    cli("features", "apply")
    runs = []
    for run_id, end, extra in (
        ("day1", "2026-11-05", ["--force-promote", "--reason", "integration test: first champion"]),
        ("day2", "2026-11-06", []),
    ):
        cli("features", "freshness", "--run-id", run_id)
        run = cli("run", "--end", end, "--days", "3", "--epochs", "2", "--run-id", run_id, *extra, ok=(0, 1))
        assert not run.get("error"), run
        runs.append(run)
        # (the DAG materializes online features here; its one series is not on the dashboard, and
        # Feast's import costs ~10 s, so the unit tests cover it)
        published = cli("metrics", "publish", "--run-id", run_id)  # the DAG's final task
        assert published["delivery"] == "pushgateway" and published["push_ok"], published
    ws = Workspace(home)
    assert not textfile_path(ws).exists()  # every publish was pushed: no textfile fallback
    samples = pushed_samples(ws)
    wait_for_scrape(servers, samples)
    return Published(samples, servers, tuple(runs))


@pytest.fixture(scope="module")
def bad_day(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """Two constructed daily runs; day 2 is bad on purpose: the gate rejects, training takes 2.5x
    day 1 (duration regression), the joint epochs leave 40% of step time in exposed lookups, and
    the newest source data is two months old (stale features)."""
    ws = Workspace(tmp_path_factory.mktemp("ws") / "home")
    push = PushConfig(url=servers.pushgateway, attempts=2, backoff_seconds=0.2)
    write_contract_run(ws, "day1", train_seconds=100.0)
    assert publish(ws, "day1", push=push).delivery == "pushgateway"
    write_contract_run(
        ws,
        "day2",
        decision="reject",
        train_seconds=250.0,
        joint_lookup=0.45,
        joint_exposed=0.4,
        latest_source_date="2026-10-01",
    )
    result = publish(ws, "day2", push=push)
    assert result.delivery == "pushgateway", result.push
    wait_for_scrape(servers, result.samples)
    return Published(result.samples, servers)


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
        if name in CATALOGUE or name in PUSHGATEWAY_SERIES:
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


def expected_series(samples: list[Sample], name: str, matchers, job: str = DEFAULT_JOB) -> dict[tuple, float]:
    out = {}
    for s in samples:
        labels = dict(s.labels)
        if s.name == name and matches({**labels, "job": job}, matchers):
            out[tuple(sorted(labels.items()))] = s.value
    return out


def scraped_series(base: str, selector: str, job: str = DEFAULT_JOB) -> dict[tuple, float]:
    out = {}
    for series in prom_query(base, selector)["result"]:
        metric = dict(series["metric"])
        assert metric.pop("job") == job, f"{selector}: honor_labels must keep the pushed job label"
        assert "exported_job" not in metric
        for extra in ("__name__", "instance"):
            metric.pop(extra, None)
        out[tuple(sorted(metric.items()))] = float(series["value"][1])
    return out


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def reads_review(expr: str) -> bool:
    """The weekly recipe review's series (job ranker_recipe_review): test_monitoring_review.py
    checks those expressions against a review's push, not against a retrain's."""
    return any(name.startswith("ranker_review_") for _, name, _ in selectors(expr))


def reads_gc(expr: str) -> bool:
    """`ranker gc`'s disk series (job ranker_gc): test_monitoring_disk.py checks those."""
    return any(name.startswith(("ranker_disk_", "ranker_gc_")) for _, name, _ in selectors(expr))


def reads_retrain(expr: str) -> bool:
    return not reads_review(expr) and not reads_gc(expr)


ALL_EXPRS = [("panel", w, e) for w, e in panel_exprs()] + [("alert", w, e) for w, e in alert_exprs()]
RANKER_EXPRS = [x for x in ALL_EXPRS if selectors(x[2]) and reads_retrain(x[2])]
RETRAIN_PANELS = [(w, e) for w, e in panel_exprs() if reads_retrain(e)]


def test_every_expression_is_covered() -> None:
    # every alert and every panel but the Airflow ones reads ranker (or Pushgateway) series
    uncovered = [(k, w) for k, w, e in ALL_EXPRS if not selectors(e) and "airflow_" not in e]
    assert uncovered == []
    retrain_alerts = [a for a in alert_exprs() if reads_retrain(a[1])]
    assert len([x for x in RANKER_EXPRS if x[0] == "alert"]) == len(retrain_alerts)


@pytest.mark.parametrize(
    ("kind", "where", "expr"), RANKER_EXPRS, ids=[f"{k}:{w}:{e[:40]}" for k, w, e in RANKER_EXPRS]
)
def test_every_series_an_expression_reads_holds_the_retrains_values(
    real_retrain: Published, kind: str, where: str, expr: str
) -> None:
    assert series_problems(real_retrain, f"{kind} {where!r}", expr) == []


def series_problems(published: Published, where: str, expr: str) -> list[str]:
    problems = []
    for selector, name, matchers in selectors(expr):
        got = scraped_series(published.servers.prometheus, selector, published.job)
        if not got:
            problems.append(f"{where}: {selector} returned nothing from Prometheus")
            continue
        if name in PUSHGATEWAY_SERIES:
            continue
        want = expected_series(published.samples, name, matchers, published.job)
        if set(got) != set(want):
            problems.append(f"{where}: {selector} label sets differ: {sorted(got)} != {sorted(want)}")
            continue
        problems += [
            f"{where}: {selector}{dict(labels)} {got[labels]} != {value}"
            for labels, value in want.items()
            if not same(got[labels], value)
        ]
    return problems


@pytest.mark.parametrize(("where", "expr"), RETRAIN_PANELS, ids=[f"{w}:{e[:40]}" for w, e in RETRAIN_PANELS])
def test_every_panel_query_runs_and_ranker_panels_return_data(
    real_retrain: Published, where: str, expr: str
) -> None:
    data = prom_query(real_retrain.servers.prometheus, expr)  # raises on a query error
    if "airflow_" not in expr:  # Airflow panels: names checked against the statsd mapping instead
        assert data["result"], f"panel {where!r}: {expr} returned no data"


def test_retrain_facts_reached_prometheus(real_retrain: Published) -> None:
    base = real_retrain.servers.prometheus
    runs = real_retrain.runs
    assert runs[0]["promoted"], runs[0]  # day 1 became the champion (on merit or forced)
    promotions = scraped_series(base, "ranker_promotions_total")
    for forced in (True, False):
        want = sum(1.0 for r in runs if r["promoted"] and bool(r["forced"]) == forced)
        assert promotions[(("forced", "true" if forced else "false"),)] == want, (forced, runs)
    assert scraped_series(base, "ranker_runs_total")[(("status", "success"),)] == 2.0
    assert set(scraped_series(base, "ranker_eval_save_hit_at_3_ratio")) == {
        (("model", "candidate"),),
        (("model", "champion"),),
        (("model", "heuristic"),),  # the non-learned ranker, scored by the real gate
    }
    assert scraped_series(base, "ranker_window_length_days")[()] == 3.0
    assert scraped_series(base, "ranker_train_epochs")[()] == 2.0
    # every alert expression evaluates on the real data (which of them fire depends on its timings)
    for _, expr in alert_exprs():
        prom_query(base, expr)


def test_every_series_the_alerts_read_holds_the_bad_days_values(bad_day: Published) -> None:
    problems = [
        p
        for alert, expr in alert_exprs()
        if reads_retrain(expr)
        for p in series_problems(bad_day, alert, expr)
    ]
    assert problems == []


def test_alert_expressions_return_exactly_the_bad_days_problems(bad_day: Published) -> None:
    base = bad_day.servers.prometheus
    firing = {alert for alert, expr in alert_exprs() if prom_query(base, expr)["result"]}
    assert firing == EXPECTED_ALERTS


def test_alert_values_are_the_runs_values(bad_day: Published) -> None:
    base = bad_day.servers.prometheus
    rules = dict(alert_exprs())
    [duration] = prom_query(base, rules["RankerTrainingDurationRegression"])["result"]
    assert float(duration["value"][1]) == 250.0 and duration["metric"]["stage"] == "train"
    [lookup] = prom_query(base, rules["RankerEmbeddingLookupRatioHigh"])["result"]
    assert lookup["metric"]["phase"] == "joint" and math.isclose(float(lookup["value"][1]), 0.4)
    [stale] = prom_query(base, rules["RankerStaleFeatures"])["result"]
    source_end = dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp()  # end of the newest source day
    assert abs(float(stale["value"][1]) - (time.time() - source_end)) < 120


def test_prometheus_loads_the_rules_and_raises_the_expected_alerts(bad_day: Published) -> None:
    base = bad_day.servers.prometheus
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


def test_pushgateway_group_is_keyed_by_job_only(bad_day: Published) -> None:
    groups = http_get_json(f"{bad_day.servers.pushgateway}/api/v1/metrics")["data"]
    assert [g["labels"] for g in groups] == [{"job": DEFAULT_JOB}]


def test_a_failed_run_replaces_the_group_and_fires_the_failure_alert(
    bad_day: Published, tmp_path: Path
) -> None:
    """Runs last (file order): reuses the servers with a separate workspace."""
    ws = Workspace(tmp_path / "home")
    push = PushConfig(url=bad_day.servers.pushgateway, attempts=1)
    write_contract_run(ws, "ok")
    publish(ws, "ok", push=push)
    result = publish(ws, "broken", status="failed", failed_step="train", push=push)
    assert result.delivery == "pushgateway"
    base = bad_day.servers.prometheus
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
    wait_for_another_scrape(base)
    assert prom_query(base, "ranker_train_epochs")["result"] == []
