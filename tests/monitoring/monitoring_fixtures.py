"""Step summaries as the pipeline writes them (docs/architecture.md "Step summaries"), publishing
them at a fixed time, and helpers to start the real Prometheus servers the integration tests use."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from summary_examples import example_summaries
from waiting import wait_until

from ranking.core.atomic import atomic_write_json
from ranking.core.workspace import Workspace
from ranking.monitoring.publish import PublishResult
from ranking.monitoring.publish import publish as publish_run

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
NOW = 1_796_000_000.0  # 2026-11-29T..Z, fixed for determinism
DAY = 86400.0


def values(result: PublishResult) -> dict[str, float]:
    """``{series key: value}`` of what a publish produced."""
    return {s.key: s.value for s in result.samples}


def publish(ws: Workspace, run_id: str, now: float = NOW, **kw: Any) -> dict[str, float]:
    """Publish ``run_id`` at a fixed time; the series it produced."""
    return values(publish_run(ws, run_id, now=now, **kw))


EXAMPLES = {step: summary.body() for step, summary in example_summaries().items()}
EVAL = EXAMPLES["train"]["eval"]  # a model's complete offline metrics
EPOCH = {k: v for k, v in EXAMPLES["train"]["epochs"][0].items() if k != "eval"}  # a complete epoch record


def write_summary(ws: Workspace, run_id: str, step: str, body: dict[str, Any], exit_code: int = 0) -> None:
    """``body`` over the step's complete example summary (ranking.core.summaries), as the step
    would record it: the fields a test names are the test's, the others a valid summary's."""
    atomic_write_json(
        ws.step_summary_path(run_id, step),
        {**EXAMPLES.get(step, {}), "step": step, "exit_code": exit_code, "run_id": run_id, **body},
    )


def epoch(n: int, phase: str, loss: float, sps: float, lookup: float, exposed: float, secs: float) -> dict:
    # the trainer measures exposed as a subset of the lookup intervals (ranking/trainer/distributed/timing.py)
    if not 0.0 <= exposed <= lookup <= 1.0:
        raise ValueError(f"an epoch with lookup {lookup} and exposed {exposed} cannot be measured")
    return {
        **EPOCH,
        "epoch": n,
        "phase": phase,
        "loss": loss,
        "samples_per_second": sps,
        "lookup_ratio": lookup,
        "exposed_lookup_ratio": exposed,
        "duration_seconds": secs,
    }


def write_contract_run(
    ws: Workspace,
    run_id: str,
    *,
    decision: str = "pass",
    promote: bool = True,
    train_seconds: float = 100.0,
    joint_lookup: float = 0.30,
    joint_exposed: float = 0.21,
    latest_source_date: str = "2026-11-30",
    champion: bool = True,
    end: str = "2026-12-01",
) -> None:
    """A complete successful run: freshness → window → train → gate → promote|reject → materialize."""
    write_summary(ws, run_id, "freshness", {"latest_source_date": latest_source_date, "lag_seconds": 7200.0})
    write_summary(
        ws,
        run_id,
        "window",
        {
            "end": end,
            "days": 20,
            "rows_train": 200_000,
            "rows_eval": 10_000,
            "label_rate": 0.031,
            "days_built": 1,
            "days_reused": 19,
            "duration_seconds": 12.5,
            "manifest": f"/ws/windows/{end}_20d/manifest.json",
        },
    )
    # the data validation: a warning (a quiet day), nothing failing, the drift and skew scores
    write_summary(ws, run_id, "validate", {**EXAMPLES["validate"], "end": end})
    epochs = [
        # semisync: part of each lookup (its output all-to-all) hidden under the dense backward
        epoch(1, "frozen", 0.125, 5000.0, 0.18, 0.15, train_seconds * 0.3),
        epoch(2, "joint", 0.118, 4000.0, joint_lookup, joint_exposed, train_seconds * 0.35),
        epoch(3, "joint", 0.112, 4000.0, joint_lookup + 0.02, joint_exposed, train_seconds * 0.35),
    ]
    write_summary(
        ws,
        run_id,
        "train",
        {
            "run_dir": f"/ws/runs/{run_id}",
            "version": f"v-{run_id}",
            "schedule": "delayed",
            "pipeline": "semisync",
            # 2 processes: the all-to-all runs asynchronously, so exposed < lookup can be measured
            # (one CPU process has nothing asynchronous: exposed == lookup there)
            "world_size": 2,
            "device": "cpu",
            "epochs": epochs,
            "eval": {**EVAL, "save_hit_at_3": 0.41, "auc": 0.74, "ne": 0.93},
            "samples_per_second": 4300.0,
            "duration_seconds": train_seconds,
        },
    )
    checks = [
        {"name": "scores_finite", "passed": True, "value": 1.0, "threshold": None, "detail": "ok"},
        {"name": "save_hit_at_3_floor", "passed": True, "value": 0.41, "threshold": 0.05, "detail": "ok"},
        {"name": "calibration", "passed": True, "value": 1.02, "threshold": [0.5, 2.0], "detail": "ok"},
    ]
    if champion:
        checks.append(
            {
                "name": "save_hit_at_3_change",
                "passed": decision == "pass",
                "value": 0.0125 if decision == "pass" else -0.05,
                "threshold": -0.01,
                "detail": "relative change",
            }
        )
        checks.append(
            {
                "name": "leakage",
                "passed": True,
                "value": 0.0125,
                "threshold": 0.1,
                "detail": "ok",
                "warning": False,
            }
        )
    write_summary(
        ws,
        run_id,
        "gate",
        {
            "decision": decision,
            "candidate": {
                **EXAMPLES["gate"]["candidate"],
                "version": f"v-{run_id}",
                "save_hit_at_3": 0.41,
                "auc": 0.74,
                "ne": 0.93,
            },
            "champion": {**EVAL, "version": "v-prev", "save_hit_at_3": 0.405, "auc": 0.735, "ne": 0.94}
            if champion
            else None,
            "checks": checks,
            "failed_checks": [c["name"] for c in checks if not c["passed"]],
            "relative_change": (0.0125 if decision == "pass" else -0.05) if champion else None,
            "ci": [-0.004, 0.03] if champion else None,
            "heuristic": EXAMPLES["gate"]["heuristic"],
            "duration_seconds": 3.25,
        },
        exit_code=0 if decision == "pass" else 1,
    )
    if decision == "pass" and promote:
        write_summary(
            ws,
            run_id,
            "promote",
            {
                "version": f"v-{run_id}",
                "previous": "v-prev",
                "reason": "gate passed",
                "forced": False,
                "noop": False,
            },
        )
    elif decision == "reject":
        write_summary(
            ws, run_id, "reject", {"version": f"v-{run_id}", "failed_checks": ["save_hit_at_3_change"]}
        )
    write_summary(ws, run_id, "materialize", {"start": "2026-11-01", "end": end, "duration_seconds": 4.0})


# --------------------------------------------------------------------------------------------
# real servers
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary(name: str) -> str | None:
    return shutil.which(name)


def http_get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_http_ok(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before becoming ready")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready at {url} after {timeout} s")


def prom_query(base: str, expr: str) -> dict[str, Any]:
    """Instant query through Prometheus's HTTP API; returns the 'data' object (raises on error)."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = http_get_json(url)
    if body.get("status") != "success":
        raise AssertionError(f"query {expr!r} failed: {body}")
    return body["data"]


def last_scrape(base: str, job: str) -> float:
    """When Prometheus last scraped ``job``: the timestamp of its ``up`` sample, 0 before the first.
    ``up`` is committed with the scrape's samples, so once it shows a scrape every series of it does."""
    result = prom_query(base, f'timestamp(up{{job="{job}"}})')["result"]
    return float(result[0]["value"][1]) if result else 0.0


def wait_for_another_scrape(base: str, job: str = "pushgateway", timeout: float = 60.0) -> None:
    """Until Prometheus has committed a scrape of ``job`` later than the last one it shows now."""
    seen = last_scrape(base, job)
    wait_until(lambda: last_scrape(base, job) > seen, f"Prometheus to scrape {job} again", timeout)
