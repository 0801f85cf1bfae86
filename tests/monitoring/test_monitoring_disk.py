"""`ranker gc`'s disk series reach a real Prometheus through a real Pushgateway (job ranker_gc,
its own group), and the dashboard's disk row and the disk alerts are run against Prometheus's
HTTP API on them.

Two measurements, in file order, pushed by ``ranking.monitoring.disk`` (what ``ranker gc`` does)
from a real measurement of a small workspace: one with 60 % of the filesystem free (quiet), then
one with 10 % free (RankerDiskLow fires; the fall of 500 GiB within seconds is also a trend to 0
within 3 days, so RankerDiskFullSoon is pending). The servers are test_monitoring_integration's
(started for this module; skipped without them).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import pytest
from monitoring_fixtures import http_get_json, prom_query, wait_for_another_scrape
from test_monitoring_integration import (
    Published,
    Servers,
    alert_exprs,
    panel_exprs,
    reads_gc,
    scraped_series,
    series_problems,
    servers,  # noqa: F401  # the module-scoped fixture
)

from ranking.monitoring.catalogue import DISK_KINDS
from ranking.monitoring.disk import GC_JOB, DiskUsage, deliver, gc_samples, measure
from ranking.registry.janitor import GcReport

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GIB = 2**30
DISK_PANELS = [(w, e) for w, e in panel_exprs() if reads_gc(e)]
DISK_ALERTS = {a: e for a, e in alert_exprs() if reads_gc(e)}
# what one `ranker gc` removed: 96 MiB, nothing it could not remove
REPORT = GcReport(
    removed=[{"kind": "run", "where": "runs/r0", "modified": 0.0, "bytes": 96 * 2**20, "held": False}]
)


def _workspace(home: Path) -> DiskUsage:
    for name, size in {
        "runs/r1/checkpoints/epoch-1/__0_0.distcp": 3000,
        "runs/r1/model.pt": 700,
        "registry/versions/v0001/model.pt": 700,
        "windows/days/2026-01-01/part.parquet": 500,
        "backtests/b/report/backtest.md": 40,
        "reviews/2026-01-07/review.md": 30,
        "feast/registry.db": 20,
        "source/impressions/date=2026-01-01/part.parquet": 900,
        "pipeline/r1/train.json": 10,
    }.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_bytes(b"x" * size)
    return measure(home, home / "registry")


def push_gc(where: Servers, usage: DiskUsage, tmp: Path) -> Published:
    samples = gc_samples(usage, REPORT, time.time())
    delivered = deliver(samples, where.pushgateway, tmp / "metrics")
    assert delivered.delivery == "pushgateway", delivered
    stamp = next(s.value for s in samples if s.name == "ranker_gc_timestamp_seconds")
    deadline = time.monotonic() + 90  # generous: the machine is shared
    while time.monotonic() < deadline:
        got = prom_query(where.prometheus, "ranker_gc_timestamp_seconds")["result"]
        if got and math.isclose(float(got[0]["value"][1]), stamp):
            break
        time.sleep(0.2)
    else:
        pytest.fail("Prometheus did not scrape the pushed gc within 90 s")
    wait_for_another_scrape(where.prometheus)  # every series of the group has the new values
    return Published(samples, where, job=GC_JOB)


@pytest.fixture(scope="module")
def roomy(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Published:  # noqa: F811
    usage = _workspace(tmp_path_factory.mktemp("roomy"))
    return push_gc(
        servers, replace(usage, free_bytes=600 * GIB, size_bytes=1000 * GIB), tmp_path_factory.mktemp("m")
    )


@pytest.fixture(scope="module")
def full(roomy: Published, tmp_path_factory: pytest.TempPathFactory) -> Published:
    usage = _workspace(tmp_path_factory.mktemp("full"))
    return push_gc(
        roomy.servers,
        replace(usage, free_bytes=100 * GIB, size_bytes=1000 * GIB),
        tmp_path_factory.mktemp("m"),
    )


def test_the_measurement_splits_the_workspace_by_kind(tmp_path: Path) -> None:
    usage = _workspace(tmp_path)
    assert usage.kinds == {
        "checkpoints": 3000,
        "runs": 700,
        "registry": 700,
        "windows": 500,
        "backtests": 40,
        "reviews": 30,
        "feature_store": 20,
        "source": 900,
        "other": 10,
    }
    assert set(usage.kinds) == set(DISK_KINDS) and 0 < usage.free_bytes <= usage.size_bytes
    # a remote registry is not measured: no registry series rather than a wrong 0
    assert "registry" not in measure(tmp_path, None).kinds


def test_the_dashboard_has_a_disk_row_and_alerts_read_the_disk() -> None:
    used = " ".join(e for _, e in DISK_PANELS)
    for name in ("ranker_disk_usage_bytes", "ranker_disk_free_bytes", "ranker_disk_size_bytes"):
        assert name in used, f"no disk panel shows {name}"
    assert set(DISK_ALERTS) == {"RankerDiskLow", "RankerDiskFullSoon", "RankerGcNotRunning"}


@pytest.mark.parametrize(("where", "expr"), DISK_PANELS, ids=[f"{w}:{e[:40]}" for w, e in DISK_PANELS])
def test_every_disk_panel_returns_the_gcs_values(roomy: Published, where: str, expr: str) -> None:
    assert prom_query(roomy.servers.prometheus, expr)["result"], f"panel {where!r}: {expr} returned no data"
    assert series_problems(roomy, f"panel {where!r}", expr) == []


def test_a_roomy_disk_raises_no_alert(roomy: Published) -> None:
    for alert, expr in DISK_ALERTS.items():
        assert series_problems(roomy, alert, expr) == []
        assert prom_query(roomy.servers.prometheus, expr)["result"] == [], alert


def test_a_disk_10_percent_free_fires_and_its_fall_is_a_trend(full: Published) -> None:
    base = full.servers.prometheus
    [low] = prom_query(base, DISK_ALERTS["RankerDiskLow"])["result"]
    assert low["metric"]["job"] == GC_JOB and float(low["value"][1]) == 0.1
    assert prom_query(base, DISK_ALERTS["RankerDiskFullSoon"])["result"]
    assert prom_query(base, DISK_ALERTS["RankerGcNotRunning"])["result"] == []
    deadline = time.monotonic() + 20
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        alerts = http_get_json(f"{base}/api/v1/alerts")["data"]["alerts"]
        states = {a["labels"]["alertname"]: a["state"] for a in alerts}
        if states.get("RankerDiskLow") == "firing":
            break
        time.sleep(0.5)
    assert states.get("RankerDiskLow") == "firing"
    assert states.get("RankerDiskFullSoon") == "pending"  # for: 1h
    assert scraped_series(base, "ranker_disk_usage_bytes", GC_JOB)[(("kind", "checkpoints"),)] == 3000.0
    # the gc's group is its own: it never replaced (or was replaced by) the retrain's
    groups = http_get_json(f"{full.servers.pushgateway}/api/v1/metrics")["data"]
    assert [g["labels"] for g in groups] == [{"job": GC_JOB}]
