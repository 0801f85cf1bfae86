"""MLflow beside the stack (issue 35, deliver 1): `stack.py up` starts the tracking server and UI on
the workspace's store; a finished ranker_retrain run is ONE MLflow run (its `track` step logs it
through the server); its page in a real browser shows its curve, its gate checks and its decision;
every task of the run links to it (infra/airflow_plugins/ranker_mlflow_links.py).

After test_stack.py's story it reads run B (rejected by the gate); alone, it unpauses
ranker_retrain and reads the scheduled run (promoted). The plugin's own rules are tested first,
without a stack.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import requests
from browser import Browser
from stack_client import REPO, TEST_TIMEOUT, Stack, budget, q, stack_cli, stack_module

RETRAIN = "ranker_retrain"
EXPERIMENT = "ranker-retrain"
PLUGIN = REPO / "infra" / "airflow_plugins" / "ranker_mlflow_links.py"
SCREENSHOTS = REPO / "var" / "stack-screenshots"


def on_the_stack(test: Any) -> Any:
    """The marks of the stack tests (this module's first tests need no stack)."""
    for mark in (
        pytest.mark.slow,
        pytest.mark.integration,
        pytest.mark.airflow,
        pytest.mark.timeout(TEST_TIMEOUT),
    ):
        test = mark(test)
    return test


def plugin() -> Any:
    spec = importlib.util.spec_from_file_location("ranker_mlflow_links", PLUGIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the link's rules (no stack) ---------------------------------------------------------------


def test_the_plugin_names_runs_as_the_dags_do() -> None:
    sys.path.insert(0, str(REPO / "dags"))
    try:
        from ranker_dags.params import ranker_run_id
    finally:
        sys.path.remove(str(REPO / "dags"))
    ids = [
        "scheduled__2026-12-06T03:00:00+00:00",
        "manual__2026-12-06T18:00:00.123456+00:00",
        "asset_triggered__2026-12-06T03:00:00+00:00_AbCd1234",
        "stack-b",
        "rest-20261206T180000",
        "a run/with spaces?and&odd=chars",
        "__leading.and.trailing__",
        "x" * 300,
    ]
    assert [plugin().ranker_run_id(i) for i in ids] == [ranker_run_id(i) for i in ids]


def test_the_link_follows_what_mlflow_knows() -> None:
    links = plugin()
    env = {
        "RANKER_MLFLOW_TRACKING_URI": "http://127.0.0.1:5000/",
        "RANKER_MLFLOW_UI_URL": "https://ml.example",
    }
    calls: list[tuple[str, str, Any]] = []

    def mlflow(runs: list[dict[str, Any]]) -> Any:
        def lookup(method: str, url: str, body: Any) -> dict[str, Any]:
            calls.append((method, url, body))
            if url.startswith("http://127.0.0.1:5000/api/2.0/mlflow/experiments/get-by-name?"):
                return {"experiment": {"experiment_id": "7", "name": EXPERIMENT}}
            return {"runs": runs}

        return lookup

    run_id = "manual__2026-12-06T18:00:00+00:00"
    found = links.run_link(RETRAIN, run_id, env, mlflow([{"info": {"run_id": "abc123"}}]))
    assert found == "https://ml.example/#/experiments/7/runs/abc123"
    assert calls[0][1].endswith("experiment_name=ranker-retrain")
    assert calls[1][2] == {
        "experiment_ids": ["7"],
        "filter": f"tags.`ranker.record_id` = 'retrain:{run_id}'",
        "max_results": 1,
    }
    # not logged yet: the experiment's runs filtered on the run id (the UI honours searchFilter)
    pending = links.run_link(RETRAIN, run_id, env, mlflow([]))
    path, _, query = pending.partition("?")
    assert path == "https://ml.example/#/experiments/7/runs"
    assert urllib.parse.parse_qs(query) == {"searchFilter": [f"tags.`ranker.run_id` = '{run_id}'"]}

    def down(method: str, url: str, body: Any) -> dict[str, Any]:
        raise urllib.error.URLError("connection refused")

    assert links.run_link(RETRAIN, run_id, env, down) == "https://ml.example/"
    # ranker_pretrain's task runs `ranker pretrain --run-id pretrain__<Airflow run id>`
    calls.clear()
    found = links.run_link("ranker_pretrain", run_id, env, mlflow([{"info": {"run_id": "def456"}}]))
    assert found == "https://ml.example/#/experiments/7/runs/def456"
    assert calls[0][1].endswith("experiment_name=ranker-pretrain")
    assert calls[1][2]["filter"] == f"tags.`ranker.record_id` = 'pretrain:pretrain__{run_id}'"
    # ranker_recipe_review's: `ranker review --run-id review__<Airflow run id>` tags its parent run
    calls.clear()
    found = links.run_link("ranker_recipe_review", run_id, env, mlflow([{"info": {"run_id": "r789"}}]))
    assert found == "https://ml.example/#/experiments/7/runs/r789"
    assert calls[0][1].endswith("experiment_name=ranker-review")
    assert calls[1][2]["filter"] == f"tags.`ranker.run_id` = 'review__{run_id}'"
    assert links.run_link("ranker_rollback", run_id, env, down) == ""  # not an MLflow run
    local = {"RANKER_MLFLOW_TRACKING_URI": "sqlite:////srv/ranker/mlflow/mlflow.db"}
    assert links.run_link(RETRAIN, run_id, local, down) == ""  # no server to open
    assert links.run_link(RETRAIN, run_id, {}, down) == ""
    plain = {"RANKER_MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}  # the UI is the server
    assert links.run_link(RETRAIN, run_id, plain, down) == "http://127.0.0.1:5000/"


def test_up_says_when_airflow_runs_with_an_older_environment(tmp_path: Path) -> None:
    """A stack started before its MLflow: `up` starts MLflow, and the Airflow components it left
    running (without the tracking URI and the plugins folder) are named until they restart."""
    stack = stack_module().Stack(tmp_path)
    env_file = tmp_path / "env.sh"
    env_file.write_text("export RANKER_HOME=/w\n")
    assert stack.note_airflow_env(env_file, kept=[]) == []  # every component started now: recorded
    assert stack.note_airflow_env(env_file, kept=["scheduler"]) == []  # same environment
    env_file.write_text("export RANKER_HOME=/w\nexport RANKER_MLFLOW_TRACKING_URI=http://127.0.0.1:1\n")
    assert stack.note_airflow_env(env_file, kept=["api-server", "scheduler"]) == ["api-server", "scheduler"]
    del stack.state["airflow_env"]  # a stack.json written before the digest was
    assert stack.note_airflow_env(env_file, kept=["scheduler"]) == ["scheduler"]
    assert stack.note_airflow_env(env_file, kept=[]) == []  # all restarted: nothing stale


# -- on the stack ------------------------------------------------------------------------------


class MlflowRest:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        resp = requests.request(method, f"{self.url}/api/2.0/mlflow/{path}", timeout=30, **kwargs)
        assert resp.status_code == 200, (path, resp.status_code, resp.text[:500])
        return dict(resp.json())

    def find(self, experiment_id: str, record_id: str) -> list[dict[str, Any]]:
        body = {"experiment_ids": [experiment_id], "filter": f"tags.`ranker.record_id` = '{record_id}'"}
        return list(self.call("POST", "runs/search", json=body).get("runs", []))

    def history(self, run_id: str, key: str) -> list[dict[str, Any]]:
        found = self.call("GET", "metrics/get-history", params={"run_id": run_id, "metric_key": key})
        return list(found.get("metrics", []))


def mlflow_url(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.state['ports']['mlflow']}"


@pytest.fixture(scope="module")
def tracked(stack: Stack, observed: dict[str, Any]) -> dict[str, Any]:
    """A finished retrain run and its MLflow run (found by its record id through the REST API)."""
    runs = {r["dag_run_id"]: r for r in stack.runs(RETRAIN)}
    if "stack-b" in runs:  # test_stack.py's rejected run
        run = stack.wait_run(RETRAIN, "stack-b")
    else:
        stack.unpause(RETRAIN)
        first = stack.wait_first_run(RETRAIN, "scheduled")
        run = stack.wait_run(RETRAIN, first["dag_run_id"])
    airflow_run_id = run["dag_run_id"]
    ranker_run_id = stack.xcom(RETRAIN, airflow_run_id, "plan")["run_id"]
    rest = MlflowRest(mlflow_url(stack))
    experiment_id = rest.call("GET", "experiments/get-by-name", params={"experiment_name": EXPERIMENT})[
        "experiment"
    ]["experiment_id"]
    found = rest.find(experiment_id, f"retrain:{ranker_run_id}")
    mlflow_run = found[0] if found else {}
    ui = f"{mlflow_url(stack)}/#/experiments/{experiment_id}/runs/{mlflow_run.get('info', {}).get('run_id')}"
    observed["mlflow"] = {
        "airflow_run": airflow_run_id,
        "found": len(found),
        "run_id": mlflow_run.get("info", {}).get("run_id"),
        "url": ui,
        "tags": {t["key"]: t["value"] for t in mlflow_run.get("data", {}).get("tags", [])},
    }
    return {
        "run": run,
        "ranker_run_id": ranker_run_id,
        "experiment_id": experiment_id,
        "found": found,
        "mlflow": mlflow_run,
        "url": ui,
        "rest": rest,
    }


@on_the_stack
def test_mlflow_starts_with_the_stack_on_loopback_only(stack: Stack, observed: dict[str, Any]) -> None:
    url = mlflow_url(stack)
    assert requests.get(f"{url}/health", timeout=30).text == "OK"
    assert f"stack: MLflow UI    {url}/   store {stack.home / 'mlflow'}" in observed["stack_up_output"]
    status = stack_cli(stack.root, "status")
    assert status.returncode == 0 and "mlflow=healthy" in status.stdout, status.stdout
    env = (stack.root / "env.sh").read_text()
    assert f"export RANKER_MLFLOW_TRACKING_URI='{url}'" in env
    assert (stack.home / "mlflow" / "mlflow.db").is_file()  # the workspace's own store
    # the host and origin checks name only the stack's address (DNS rebinding, cross-site writes)
    experiments = f"{url}/api/2.0/mlflow/experiments/search?max_results=1"
    assert requests.get(experiments, timeout=30).status_code == 200
    assert requests.get(experiments, headers={"Host": "evil.example"}, timeout=30).status_code == 403
    create = f"{url}/api/2.0/mlflow/experiments/create"
    cross = requests.post(create, json={"name": "x"}, headers={"Origin": "http://evil.example"}, timeout=30)
    assert cross.status_code == 403
    port = stack.state["ports"]["mlflow"]
    listening = [
        line.split()
        for table in ("/proc/net/tcp", "/proc/net/tcp6")
        for line in Path(table).read_text().splitlines()[1:]
        if line.split()[3] == "0A" and int(line.split()[1].split(":")[1], 16) == port
    ]
    assert [fields[1].split(":")[0] for fields in listening] == ["0100007F"], listening  # 127.0.0.1


# `ranker` on the stack's workspace without the server's URI (env.sh not sourced): the local store
LOCAL_WRITE = """
import json, sys
from pathlib import Path
from ranking.tracking.outbox import track
from ranking.tracking.records import TrackingRecord
from ranking.tracking.settings import tracking_settings
home, experiment, artifact = sys.argv[1:4]
record = TrackingRecord(record_id="stack-test:local-write", experiment=experiment, run_name="local-write",
                        tags={"ranker.run_id": "local-write"}, artifacts=[artifact])
print(track(record, tracking_settings(Path(home))).model_dump_json())
"""


@on_the_stack
def test_ranker_without_the_servers_uri_writes_the_same_store(stack: Stack, tmp_path: Path) -> None:
    """An experiment the server created takes artifacts from a `ranker` that writes the store
    directly (its files land in the workspace's artifacts folder; the UI serves them)."""
    rest = MlflowRest(mlflow_url(stack))
    experiment_id = rest.call("POST", "experiments/create", json={"name": "stack-test-local-write"})[
        "experiment_id"
    ]
    artifact = tmp_path / "note.md"
    artifact.write_text("written without the server\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKER_", "MLFLOW_"))}
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c", LOCAL_WRITE, str(stack.home), "stack-test-local-write",
         str(artifact)],
        capture_output=True, text=True, timeout=120, env={**env, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    ref = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ref["queued"] is False and ref["experiment_id"] == experiment_id, ref
    served = requests.get(
        f"{rest.url}/get-artifact", params={"path": "note.md", "run_uuid": ref["run_id"]}, timeout=30
    )
    assert served.status_code == 200 and served.text == "written without the server\n"
    assert not list((stack.home / "mlflow" / "queue").glob("*.json"))


def _expected_decision(stack: Stack, run_id: str) -> str:
    states = stack.task_states(RETRAIN, run_id)
    if states.get("promote") == "success":
        return "promoted"
    if states.get("record_rejection") == "success":
        return "rejected"
    return "kept"


@on_the_stack
def test_the_run_is_one_mlflow_run_with_its_curve_gate_checks_and_decision(
    stack: Stack, tracked: dict[str, Any]
) -> None:
    run, rest = tracked["run"], tracked["rest"]
    assert len(tracked["found"]) == 1, tracked["found"]  # one MLflow run per pipeline run
    info, data = tracked["mlflow"]["info"], tracked["mlflow"]["data"]
    tags = {t["key"]: t["value"] for t in data.get("tags", [])}
    assert info["run_name"] == tracked["ranker_run_id"] and info["status"] == "FINISHED", info
    assert tags["ranker.run_id"] == tracked["ranker_run_id"]
    assert tags["ranker.decision"].startswith(_expected_decision(stack, run["dag_run_id"])), tags
    assert tags["ranker.reason"], tags
    gate = stack.xcom(RETRAIN, run["dag_run_id"], "gate")
    metrics = {m["key"]: m["value"] for m in data.get("metrics", [])}
    for check in gate["checks"]:
        assert metrics[f"gate.{check['name']}.passed"] == (1.0 if check["passed"] else 0.0), check
        if check["value"] is not None:  # a check may have no value (an unfair comparison)
            assert metrics[f"gate.{check['name']}.value"] == pytest.approx(check["value"]), check
    # the per-step curve: more points than epochs
    train = stack.xcom(RETRAIN, run["dag_run_id"], "train")
    loss = rest.history(info["run_id"], "train_loss")
    assert len(loss) > len(train["epochs"]) >= 1, loss
    assert [m["step"] for m in loss] == sorted(m["step"] for m in loss)
    # the artifacts are in the workspace's store and come back through the server as the run
    # folder has them
    artifacts = stack.home / "mlflow" / "artifacts"
    assert info["artifact_uri"].removeprefix("file://").startswith(f"{artifacts}/"), info
    run_dir = Path(train["run_dir"])
    served = requests.get(
        f"{rest.url}/get-artifact", params={"path": "report.md", "run_uuid": info["run_id"]}, timeout=30
    )
    assert served.status_code == 200 and served.content == (run_dir / "report.md").read_bytes()


def _experiment_only(method: str, url: str, body: Any) -> dict[str, Any]:
    """MLflow as it is before the track step: the experiment, no run of this id yet."""
    answer: dict[str, Any] = plugin().http_lookup(method, url, body)
    return {} if url.endswith("/runs/search") else answer


def _login(browser: Browser, stack: Stack, path: str) -> None:
    browser.goto(f"{stack.api_url}{path}")
    browser.wait_for("document.querySelector('input[name=username]')", "see the login form")
    browser.type_into("input[name=username]", "admin")
    browser.type_into("input[name=password]", stack.password)
    browser.wait_for("!document.querySelector('button[type=submit]').disabled", "enable Sign in")
    browser.click("button[type=submit]")
    browser.wait_for(f"location.pathname === {json.dumps(path)}", f"come back to {path} after login")


@on_the_stack
def test_every_task_links_to_the_run_and_its_page_shows_curve_checks_and_decision(
    stack: Stack, tracked: dict[str, Any], observed: dict[str, Any]
) -> None:
    run_id = tracked["run"]["dag_run_id"]
    info, data = tracked["mlflow"]["info"], tracked["mlflow"]["data"]
    tags = {t["key"]: t["value"] for t in data.get("tags", [])}
    metric_keys = {m["key"] for m in data.get("metrics", [])}
    # the REST API: every task of the run, the same link (the one MLflow run)
    tasks = stack.task_instances(RETRAIN, run_id)
    links = {
        task: stack.get(f"/dags/{RETRAIN}/dagRuns/{q(run_id)}/taskInstances/{task}/links")["extra_links"]
        for task in tasks
    }
    assert links == {task: {"MLflow run": tracked["url"]} for task in tasks}, links
    rest = tracked["rest"]
    loss_points = len(rest.history(info["run_id"], "train_loss"))
    env = {"RANKER_MLFLOW_TRACKING_URI": rest.url}
    decoy = ""
    browser = Browser()
    seen: dict[str, Any] = {}
    try:
        # the task's Details tab lists its extra links; following it opens the run
        _login(browser, stack, f"/dags/{RETRAIN}/runs/{run_id}/tasks/gate/details")
        anchor = "[...document.querySelectorAll('a')].find(a => a.textContent.trim() === 'MLflow run')"
        browser.wait_for(anchor, "see the task's MLflow link", timeout=budget("dag_parsed"))
        href = browser.evaluate(f"{anchor}.href")
        assert href == tracked["url"], href
        browser.screenshot(SCREENSHOTS / "airflow-task-mlflow-link.png")
        browser.goto(href)
        browser.wait_for_text("ranker.decision")
        text = browser.evaluate("document.body.innerText")
        assert info["run_name"] in text and tags["ranker.decision"] in text
        gate_keys = sorted(k for k in metric_keys if k.startswith("gate.") and k.endswith(".value"))
        assert gate_keys and all(k in text for k in gate_keys), gate_keys
        assert "train_loss" in text
        seen["run_page"] = {"gate_metrics_shown": gate_keys, "decision": tags["ranker.decision"]}
        browser.screenshot(SCREENSHOTS / "mlflow-run.png")

        # the curve: MLflow's metric page plots every logged step of train_loss
        query = urllib.parse.urlencode({
            "runs": json.dumps([info["run_id"]]),
            "metric": json.dumps("train_loss"),
            "experiments": json.dumps([tracked["experiment_id"]]),
            "plot_metric_keys": json.dumps(["train_loss"]),
            "plot_layout": "{}",
            "x_axis": "step",
            "y_axis_scale": "linear",
            "line_smoothness": "1",
            "show_point": "false",
            "deselected_curves": "[]",
            "last_linear_y_axis_range": "[]",
        })  # fmt: skip
        browser.goto(f"{mlflow_url(stack)}/#/metric?{query}")
        points = (
            "[...document.querySelectorAll('.js-plotly-plot')]"
            ".flatMap(p => (p.data || []).map(t => (t.x || []).length))"
        )
        browser.wait_for(f"{points}.some(n => n > 0)", "see the train_loss curve")
        plotted = browser.evaluate(points)
        assert loss_points in plotted, (plotted, loss_points)
        seen["train_loss_points_plotted"] = plotted
        time.sleep(1)
        png = browser.screenshot(SCREENSHOTS / "mlflow-train-loss.png")
        assert len(png) > 20_000  # a drawn chart, not a blank page

        # before the track step has logged it, the link lists the experiment's runs filtered on the
        # run id: the UI applies that filter (a decoy run of another id is left out)
        decoy = rest.call(
            "POST",
            "runs/create",
            json={
                "experiment_id": tracked["experiment_id"],
                "run_name": "decoy",
                "tags": [{"key": "ranker.run_id", "value": "decoy"}],
            },
        )["run"]["info"]["run_id"]
        pending = plugin().run_link(RETRAIN, run_id, env, _experiment_only)
        assert "searchFilter=" in pending, pending
        browser.goto(pending)
        browser.wait_for_text("1 matching run")
        text = browser.evaluate("document.body.innerText")
        assert info["run_name"] in text and "decoy" not in text
        seen["pending_link"] = pending
    finally:
        if decoy:
            rest.call("POST", "runs/delete", json={"run_id": decoy})
        browser.close()
    observed.setdefault("mlflow", {})["browser"] = seen
