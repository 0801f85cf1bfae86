"""The stack tests' view of a running stack: its REST API (with a login), Prometheus, the workspace.

A plain module (like tests/dags/dag_test_paths.py): `from conftest import ...` is ambiguous when
several test folders have a conftest.py.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[2]
STACK_PY = REPO / "infra" / "stack" / "stack.py"
DOCS = REPO / "docs" / "orchestration.md"
RANKER_BIN = Path(os.environ.get("RANKER_BIN") or REPO / ".venv" / "bin" / "ranker")
FINISHED = ("success", "failed")


def stack_module() -> Any:
    """infra/stack/stack.py as a module (its SMALL_WORKSPACE, the pure helpers)."""
    spec = importlib.util.spec_from_file_location("stack_py", STACK_PY)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the workspace is `stack.py up --small-workspace`'s: DAYS days ending yesterday (UTC), so a
# scheduled run's eval day is in it
DAYS = int(stack_module().SMALL_WORKSPACE["days"])
TODAY = dt.datetime.now(dt.UTC).date()
LAST_DAY = TODAY - dt.timedelta(days=1)
START = TODAY - dt.timedelta(days=DAYS)


# What the story's steps took (docs/orchestration.md, "Tests on the real stack"; 2 shared cores with
# other jobs running): every wait allows LOAD_MARGIN times that, so the suite holds on a machine
# busy with other work (run with a CPU hog beside it: the docs have the figures). A wait that runs
# out raises with the states it saw, well before pytest's own timeout (TEST_TIMEOUT).
MEASURED_SECONDS = {
    "workspace": 34,  # --small-workspace: synth + features apply
    "stack_up": 15,  # initdb, migrate, 7 components healthy
    "dag_parsed": 20,  # the dag-processor's first parse of every DAG
    "retrain_run": 40,  # one ranker_retrain run (the longest: stack-a with its retried train)
    "pretrain_run": 13,
    "rollback_run": 2,
    "first_scheduled_run": 5,  # unpause -> the scheduler creates the run
    "review_run": 70,  # ranker_recipe_review's scheduled run: 3 days of 2 recipes (test_stack_review.py)
    "review_day_run": 25,  # a manual review of 1 day
}
LOAD_MARGIN = 8
STORY_SECONDS = 204  # the whole module, measured


def budget(step: str, runs: int = 1) -> float:
    """Seconds to wait for ``runs`` consecutive steps of a kind (queued runs wait for the ones ahead)."""
    return float(MEASURED_SECONDS[step] * runs * LOAD_MARGIN)


# pytest-timeout counts a test's fixtures too: the first test sets up the stack and the first runs
TEST_TIMEOUT = int(STORY_SECONDS * LOAD_MARGIN)


def doc_blocks(tag: str) -> list[str]:
    """The fenced ```bash <tag> blocks of docs/orchestration.md, in order (run verbatim)."""
    blocks = re.findall(rf"^```bash {re.escape(tag)}\n(.*?)^```$", DOCS.read_text(), re.M | re.S)
    assert blocks, f"no ```bash {tag} block in {DOCS}"
    return blocks


def stack_cli(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(STACK_PY), *args, "--dir", str(root)],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def ranker(home: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(RANKER_BIN), *args, "--json", "--home", str(home)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"ranker {' '.join(args)} failed:\n{proc.stderr[-3000:]}"
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def when(stamp: str | None) -> datetime:
    assert stamp, "no timestamp"
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@dataclass
class Stack:
    root: Path
    home: Path  # the workspace (RANKER_HOME of the DAGs)
    state: dict[str, Any]
    password: str
    session: requests.Session

    @classmethod
    def connect(cls, root: Path, home: Path) -> Stack:
        state = json.loads((root / "stack.json").read_text())
        password = json.loads((root / "secrets.json").read_text())["admin_password"]
        stack = cls(root, home, state, password, requests.Session())
        stack.session.headers["Authorization"] = f"Bearer {stack.login('admin', password)}"
        return stack

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.state['ports']['api']}"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.state['ports']['prometheus']}"

    def login(self, username: str, password: str) -> str:
        resp = requests.post(
            f"{self.api_url}/auth/token", json={"username": username, "password": password}, timeout=30
        )
        resp.raise_for_status()
        return str(resp.json()["access_token"])

    # REST API

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, f"{self.api_url}/api/v2{path}", timeout=60, **kwargs)

    def get(self, path: str, **params: Any) -> Any:
        resp = self.request("GET", path, params=params)
        assert resp.status_code == 200, f"GET {path}: {resp.status_code} {resp.text[:500]}"
        return resp.json()

    def unpause(self, dag_id: str) -> None:
        self._set_paused(dag_id, False)

    def pause(self, dag_id: str) -> None:
        self._set_paused(dag_id, True)

    def _set_paused(self, dag_id: str, paused: bool) -> None:
        resp = self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": paused})
        assert resp.status_code == 200, resp.text

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any]) -> requests.Response:
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        return self.request("POST", f"/dags/{dag_id}/dagRuns", json=body)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns", order_by="id", limit=100)["dag_runs"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.get(f"/dags/{dag_id}/dagRuns/{q(run_id)}"))

    def wait_run(
        self, dag_id: str, run_id: str, timeout: float = budget("retrain_run", runs=2)
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(dag_id, run_id)
            if run["state"] in FINISHED:
                return run
            time.sleep(2)
        raise TimeoutError(
            f"{dag_id} {run_id} not finished after {timeout} s: {self.task_states(dag_id, run_id)}"
        )

    def wait_first_run(
        self,
        dag_id: str,
        run_type: str,
        timeout: float = budget("first_scheduled_run") + budget("retrain_run"),
        exclude: set[str] | frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """The first run of that type, other than the runs in `exclude`, once the scheduler made it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runs = [
                r for r in self.runs(dag_id) if r["run_type"] == run_type and r["dag_run_id"] not in exclude
            ]
            if runs:
                return runs[0]
            time.sleep(2)
        raise TimeoutError(f"no {run_type} run of {dag_id} after {timeout} s")

    def upstream_asset_events(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The asset events that made an asset-triggered run."""
        return list(self.get(f"/dags/{dag_id}/dagRuns/{q(run_id)}/upstreamAssetEvents")["asset_events"])

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        rows = self.get(f"/dags/{dag_id}/dagRuns/{q(run_id)}/taskInstances", limit=100)["task_instances"]
        return {row["task_id"]: row for row in rows}

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {task: ti["state"] for task, ti in self.task_instances(dag_id, run_id).items()}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        return self.get(f"/dags/{dag_id}/dagRuns/{q(run_id)}/taskInstances/{task_id}/xcomEntries/{key}")[
            "value"
        ]

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        path = f"/dags/{dag_id}/dagRuns/{q(run_id)}/taskInstances/{task_id}/tries"
        return list(self.get(path)["task_instances"])

    def log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        path = f"/dags/{dag_id}/dagRuns/{q(run_id)}/taskInstances/{task_id}/logs/{try_number}"
        resp = self.request("GET", path, headers={"Accept": "application/json"})
        assert resp.status_code == 200, resp.text[:500]
        lines = []
        for item in resp.json()["content"]:
            if not isinstance(item, dict):
                lines.append(str(item))
                continue
            lines.append(str(item.get("event", "")))
            if item.get("error_detail"):  # the exception of a failed try, as structured data
                lines.append(json.dumps(item["error_detail"]))
        return "\n".join(lines)

    # Prometheus

    def prom_query(self, expr: str) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.prometheus_url}/api/v1/query", params={"query": expr}, timeout=30)
        resp.raise_for_status()
        return list(resp.json()["data"]["result"])

    def wait_prom(self, expr: str, check: Any, timeout: float = 120) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.prom_query(expr)
            if check(result):
                return result
            time.sleep(1)
        raise TimeoutError(f"Prometheus {expr}: {result}")


def summarize(stack: Stack, run: dict[str, Any], dag_id: str = "ranker_retrain") -> dict[str, Any]:
    """A finished run and its task instances, for the observations file."""
    tis = stack.task_instances(dag_id, run["dag_run_id"])
    return {
        "run_id": run["dag_run_id"],
        "run_type": run["run_type"],
        "state": run["state"],
        "start": run["start_date"],
        "end": run["end_date"],
        "seconds": round((when(run["end_date"]) - when(run["start_date"])).total_seconds(), 1),
        "tasks": {
            t: {
                "state": ti["state"],
                "try": ti["try_number"],
                "start": ti["start_date"],
                "end": ti["end_date"],
            }
            for t, ti in tis.items()
        },
    }


def q(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")
