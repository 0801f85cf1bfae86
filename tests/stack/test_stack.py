"""The pipeline under a real Airflow: Postgres, api-server, scheduler (LocalExecutor), dag-processor,
triggerer, Pushgateway and Prometheus started by `infra/stack/stack.py`, driven through the REST API.

One story on one stack and one workspace (module fixtures, each after the previous):

1. unpausing ranker_retrain makes the scheduler create the run of the latest complete interval of
   its timetable (catchup off): a `scheduled` run, no Params, promotes v0001 (no champion yet);
2. two manual runs triggered through the API at once, with Params: they run one after the other
   (max_active_runs=1, pool `training`); the first one's `ranker train` process is SIGKILLed
   mid-epoch, the scheduler retries the task and it resumes from the last epoch checkpoint; it is
   promoted by force (Params force_promote + reason), so the champion moves;
3. ranker_rollback through the API;
4. unpausing ranker_pretrain fires its scheduled run: a new base model, an event on the base Asset,
   and an asset-triggered ranker_retrain run warm-started from that base (the default recipe);
then: the serving DAG on the champion Asset ran after each move and saw its version; the runs'
metrics are in Prometheus; the rejected run (B) says so in the grid and in its gate task's log; the
UI and Prometheus's alerts page as a browser shows them; last, the REST and CLI examples of
docs/orchestration.md run verbatim.

Every wait is sized from measured step times with a margin (stack_client.budget), so the suite
holds on a busy machine.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from browser import Browser
from stack_client import (
    LAST_DAY,
    REPO,
    TEST_TIMEOUT,
    Stack,
    budget,
    doc_blocks,
    ranker,
    stack_cli,
    summarize,
    when,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.airflow,
    pytest.mark.timeout(TEST_TIMEOUT),
]

RETRAIN, ROLLBACK, SERVING = "ranker_retrain", "ranker_rollback", "ranker_serving_reload"
PRETRAIN = "ranker_pretrain"
DAY_A, DAY_B = LAST_DAY - dt.timedelta(days=1), LAST_DAY - dt.timedelta(days=2)
# run A trains 4 epochs so that its process can be killed after epoch 1's checkpoint with epochs
# still to go (about a second each on the tiny workspace); it
# is promoted by force (an older eval day than the champion's fails the gate's fair comparison), so
# that the rollback has a champion to go back from
CONF_A = {
    "window_end": DAY_A.isoformat(),
    "window_days": 5,
    "epochs": 4,
    "schedule": "F,J,J,J",
    "force_promote": True,
    "reason": "stack test: promoted so that a rollback has somewhere to go",
}
CONF_B = {"window_end": DAY_B.isoformat(), "window_days": 4, "epochs": 2}
SCREENSHOTS = Path(os.environ.get("RANKER_SCREENSHOTS_DIR") or REPO / "var" / "stack-screenshots")


# -- the story ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scheduled_run(stack: Stack, observed: dict[str, Any]) -> dict[str, Any]:
    stack.unpause(RETRAIN)
    first = stack.wait_first_run(RETRAIN, "scheduled")
    run = stack.wait_run(RETRAIN, first["dag_run_id"])
    observed["scheduled_run"] = summarize(stack, run)
    return run


@pytest.fixture(scope="module")
def pair(stack: Stack, scheduled_run: dict[str, Any], observed: dict[str, Any]) -> dict[str, Any]:
    """Runs A and B triggered together; A's training process is killed once epoch 1 is checkpointed."""
    created = {}
    for run_id, conf in (("stack-a", CONF_A), ("stack-b", CONF_B)):
        resp = stack.trigger(RETRAIN, run_id, conf)
        assert resp.status_code == 200, resp.text
        created[run_id] = resp.json()
    states_at_trigger = {run_id: stack.run(RETRAIN, run_id)["state"] for run_id in created}
    kill = kill_training_mid_epoch(stack, "stack-a")
    kill["listeners"] = stack_listeners(stack)  # with a task running: the busiest moment
    runs = {run_id: stack.wait_run(RETRAIN, run_id) for run_id in created}
    observed["pair"] = {
        "states_right_after_trigger": states_at_trigger,
        "kill": {k: v for k, v in kill.items() if k != "listeners"},
        "runs": {run_id: summarize(stack, run) for run_id, run in runs.items()},
        "train_tries_of_a": [
            {k: t[k] for k in ("try_number", "state", "start_date", "end_date")}
            for t in stack.tries(RETRAIN, "stack-a", "train")
        ],
    }
    return {"created": created, "states_at_trigger": states_at_trigger, "kill": kill, "runs": runs}


@pytest.fixture(scope="module")
def rollback_run(stack: Stack, pair: dict[str, Any], observed: dict[str, Any]) -> dict[str, Any]:
    before = ranker(stack.home, "models", "list")
    resp = stack.trigger(ROLLBACK, "stack-rollback", {"reason": "stack test: on-call drill"})
    assert resp.status_code == 200, resp.text
    run = stack.wait_run(ROLLBACK, "stack-rollback", timeout=budget("rollback_run") + budget("retrain_run"))
    observed["rollback_run"] = summarize(stack, run, ROLLBACK)
    return {"run": run, "before": before, "after": ranker(stack.home, "models", "list")}


@pytest.fixture(scope="module")
def base_run(stack: Stack, rollback_run: dict[str, Any], observed: dict[str, Any]) -> dict[str, Any]:
    """Unpausing ranker_pretrain (daily on the test stack) fires its scheduled run: a new base model and
    an event on the base Asset, on which ranker_retrain is scheduled besides its cron: it runs at once."""
    known = {r["dag_run_id"] for r in stack.runs(RETRAIN)}
    stack.unpause(PRETRAIN)
    first = stack.wait_first_run(PRETRAIN, "scheduled")
    pretrain = stack.wait_run(PRETRAIN, first["dag_run_id"], timeout=budget("pretrain_run"))
    assert pretrain["state"] == "success", stack.log(PRETRAIN, pretrain["dag_run_id"], "pretrain", 1)[-3000:]
    triggered = stack.wait_first_run(RETRAIN, "asset_triggered", exclude=known)
    retrain = stack.wait_run(RETRAIN, triggered["dag_run_id"])
    observed["pretrain_run"] = summarize(stack, pretrain, PRETRAIN)
    observed["base_triggered_run"] = summarize(stack, retrain)
    observed["base"] = {
        "version": stack.xcom(PRETRAIN, pretrain["dag_run_id"], "pretrain")["version"],
        "warm_start": stack.xcom(RETRAIN, retrain["dag_run_id"], "train")["warm_start"]["source"],
    }
    return {"pretrain": pretrain, "retrain": retrain, "models": ranker(stack.home, "models", "list")}


def training_process(run_id: str) -> int | None:
    """The pid of `ranker train ... --run-id RUN_ID` (what the train task's worker runs)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        is_ranker = any(a.endswith("/ranker") for a in args[:2])
        if (
            is_ranker
            and "train" in args
            and "--run-id" in args
            and args[args.index("--run-id") + 1] == run_id
        ):
            return int(proc.name)
    return None


def kill_training_mid_epoch(
    stack: Stack, run_id: str, timeout: float = budget("retrain_run", runs=2)
) -> dict[str, Any]:
    """SIGKILL the run's `ranker train` once an epoch checkpoint is complete (its `.sha256` sidecar is
    written last, for a file or a sharded folder checkpoint alike) and before the last epoch ends."""
    checkpoints = stack.home / "runs" / run_id / "checkpoints"

    def complete() -> int:
        return len(list(checkpoints.glob("epoch-*.sha256"))) if checkpoints.is_dir() else 0

    deadline = time.monotonic() + timeout
    pid: int | None = None
    while time.monotonic() < deadline:
        if pid is None:
            pid = training_process(run_id)  # a /proc scan: only until the process is found
        elif not Path(f"/proc/{pid}").exists():
            raise AssertionError(f"{run_id}'s training (pid {pid}) ended before it could be killed")
        elif complete():
            os.kill(pid, signal.SIGKILL)
            killed_at = dt.datetime.now(dt.UTC)
            while Path(f"/proc/{pid}").exists() and training_process(run_id) == pid:
                time.sleep(0.05)
            # what the killed try had finished: the checkpoints present once the process is gone
            return {"pid": pid, "killed_at": killed_at.isoformat(), "epochs_checkpointed": complete()}
        time.sleep(0.01 if pid else 0.05)
    raise TimeoutError(f"the training process of {run_id} never had a checkpoint to resume from")


def stack_listeners(stack: Stack) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every listening TCP socket of the stack's processes and their children."""
    roots = {int(p) for p in stack.state["pids"].values() if p}
    pg_pid = stack.root / "pg" / "postmaster.pid"
    if pg_pid.is_file():
        roots.add(int(pg_pid.read_text().split()[0]))
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    members = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in members and pid not in members:
                members.add(pid)
                grew = True
    inodes: dict[str, int] = {}
    for pid in members:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = fields[1].split(":")
            found.append((_address(addr_hex, family), int(port_hex, 16), inodes[fields[9]]))
    return found


def _address(hex_addr: str, family: int) -> str:
    raw = bytes.fromhex(hex_addr)
    if family == 4:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    import ipaddress

    return str(ipaddress.IPv6Address(b"".join(words)))


# -- the stack itself --------------------------------------------------------------------------


def test_every_listener_is_on_loopback(stack: Stack, pair: dict[str, Any]) -> None:
    listeners = pair["kill"]["listeners"]
    ports = {port for _, port, _ in listeners}
    assert set(stack.state["ports"].values()) <= ports, listeners  # API, Postgres, Prometheus, Pushgateway
    assert all(addr == "127.0.0.1" for addr, _, _ in listeners), listeners
    assert not ports & {8793, 8794}, listeners  # no worker/trigger log servers


def test_the_password_file_is_private_and_the_login_works(stack: Stack) -> None:
    passwords = stack.root / "airflow" / "simple_auth_manager_passwords.json"
    for secret in (passwords, stack.root / "secrets.json", stack.root / "env.sh", stack.root / "stack.json"):
        assert secret.stat().st_mode & 0o077 == 0, oct(secret.stat().st_mode)
    assert stack.login("admin", stack.password)
    bad = stack.session.post(f"{stack.api_url}/auth/token", json={"username": "admin", "password": "wrong"})
    assert bad.status_code == 401


def test_a_second_up_finds_it_running(stack: Stack) -> None:
    before = dict(stack.state["pids"])
    again = stack_cli(stack.root, "up")
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stdout
    status = stack_cli(stack.root, "status")
    assert status.returncode == 0 and "scheduler=healthy" in status.stdout, status.stdout
    assert json.loads((stack.root / "stack.json").read_text())["pids"] == before


def test_schema_invalid_params_are_refused_when_the_run_is_created(stack: Stack) -> None:
    for i, conf in enumerate(({"window_days": 0}, {"window_end": "2026-13-40"}, {"schedule": "sometimes"})):
        resp = stack.trigger(RETRAIN, f"stack-invalid-{i}", conf)
        assert resp.status_code == 400, (conf, resp.status_code, resp.text)
        assert "Invalid input for param" in resp.json()["detail"]
        assert stack.request("GET", f"/dags/{RETRAIN}/dagRuns/stack-invalid-{i}").status_code == 404


# -- the runs ----------------------------------------------------------------------------------


def test_the_scheduled_run_fires_from_the_timetable(stack: Stack, scheduled_run: dict[str, Any]) -> None:
    run = scheduled_run
    assert run["run_type"] == "scheduled" and run["state"] == "success", stack.task_states(
        RETRAIN, run["dag_run_id"]
    )
    start, end = when(run["data_interval_start"]), when(run["data_interval_end"])
    assert (start.hour, start.minute, end - start) == (3, 0, dt.timedelta(days=1))  # cron 0 3 * * *
    assert end <= dt.datetime.now(dt.UTC)  # the latest complete interval (catchup off)
    plan = stack.xcom(RETRAIN, run["dag_run_id"], "plan")
    assert plan["window_end"] == (end.date() - dt.timedelta(days=1)).isoformat()
    assert plan["config_params"] == {}  # no Params: the workspace's ranker.toml
    assert stack.task_states(RETRAIN, run["dag_run_id"])["promote"] == "success"


def test_manual_runs_with_params_run_to_success(stack: Stack, pair: dict[str, Any]) -> None:
    for run_id, conf in (("stack-a", CONF_A), ("stack-b", CONF_B)):
        run = pair["runs"][run_id]
        assert (run["run_type"], run["state"]) == ("manual", "success"), stack.task_states(RETRAIN, run_id)
        assert run["conf"] == conf
        plan = stack.xcom(RETRAIN, run_id, "plan")
        assert plan["window_end"] == conf["window_end"] and plan["epochs"] == conf["epochs"]
        window = stack.xcom(RETRAIN, run_id, "build_window")
        assert (window["end"], window["days"]) == (conf["window_end"], conf["window_days"])
        effective = json.loads(Path(stack.xcom(RETRAIN, run_id, "train")["effective_config"]).read_text())
        assert effective["config"]["recipe"]["epochs"] == conf["epochs"]
        assert effective["sources"]["recipe.epochs"] == "param"


def test_two_triggers_run_one_after_the_other(stack: Stack, pair: dict[str, Any]) -> None:
    assert sorted(pair["states_at_trigger"].values()) in (["queued", "queued"], ["queued", "running"])
    first, second = sorted(pair["runs"].values(), key=lambda r: when(r["start_date"]))
    assert when(second["start_date"]) >= when(first["end_date"])  # max_active_runs=1
    tis = [
        ti
        for run in [*pair["runs"].values()]
        for ti in [stack.task_instances(RETRAIN, run["dag_run_id"])["train"]]
    ]
    assert {ti["pool"] for ti in tis} == {"training"}
    spans = sorted((when(ti["start_date"]), when(ti["end_date"])) for ti in tis)
    assert spans[1][0] >= spans[0][1]  # never two trainings at once


def test_a_killed_training_is_retried_and_resumes_from_its_checkpoint(
    stack: Stack, pair: dict[str, Any]
) -> None:
    kill = pair["kill"]
    done = kill["epochs_checkpointed"]
    assert 1 <= done < CONF_A["epochs"], kill  # killed after a checkpoint, before the last epoch ended
    tries = sorted(stack.tries(RETRAIN, "stack-a", "train"), key=lambda t: t["try_number"])
    assert [(t["try_number"], t["state"]) for t in tries] == [(1, "failed"), (2, "success")], tries
    assert when(tries[0]["end_date"]) >= dt.datetime.fromisoformat(kill["killed_at"]) - dt.timedelta(
        seconds=1
    )
    first_log = stack.log(RETRAIN, "stack-a", "train", 1)
    # the step's process died of SIGKILL: a crash (retried), not a user error or a negative decision
    assert "RankerStepCrashed" in first_log and "crashed with exit code -9" in first_log, first_log[-2000:]
    summary = stack.xcom(RETRAIN, "stack-a", "train")
    assert summary["resumed_after_epoch"] == done
    second_log = stack.log(RETRAIN, "stack-a", "train", 2)
    assert f"--resume: continuing after epoch {done}" in second_log
    assert f'"epoch": {done}, "event": "epoch_end"' not in second_log  # the finished epochs are not redone
    assert stack.task_states(RETRAIN, "stack-a")["gate"] == "success"


def test_rollback_through_the_api(stack: Stack, rollback_run: dict[str, Any]) -> None:
    assert rollback_run["run"]["state"] == "success"
    before, after = rollback_run["before"], rollback_run["after"]
    event = after["history"][-1]
    assert (event["action"], event["from"], event["to"]) == (
        "rollback",
        before["champion"],
        after["champion"],
    )
    assert event["from"] != event["to"]
    assert event["reason"] == "stack test: on-call drill"
    assert event["who"] == "admin"  # the API user who triggered it


def test_a_new_base_model_triggers_a_retrain_warm_started_from_it(
    stack: Stack, base_run: dict[str, Any]
) -> None:
    pretrain, retrain = base_run["pretrain"], base_run["retrain"]
    assert (pretrain["run_type"], pretrain["state"]) == ("scheduled", "success")
    summary = stack.xcom(PRETRAIN, pretrain["dag_run_id"], "pretrain")
    eval_day = when(pretrain["data_interval_end"]).date() - dt.timedelta(days=1)
    assert summary["moved"] and summary["for_end"] == eval_day.isoformat(), summary
    assert base_run["models"]["base"] == summary["version"]
    assert (retrain["run_type"], retrain["state"]) == ("asset_triggered", "success"), stack.task_states(
        RETRAIN, retrain["dag_run_id"]
    )
    events = stack.upstream_asset_events(RETRAIN, retrain["dag_run_id"])
    assert [(e["source_dag_id"], e["extra"]["version"]) for e in events] == [(PRETRAIN, summary["version"])]
    assert when(retrain["start_date"]) >= when(
        stack.task_instances(PRETRAIN, pretrain["dag_run_id"])["pretrain"]["end_date"]
    )
    # the default recipe (warm_start = "base"): this run starts from the new base; the earlier
    # runs of the story had none yet and trained from scratch
    train = stack.xcom(RETRAIN, retrain["dag_run_id"], "train")
    assert train["warm_start"]["source"] == f"base {summary['version']}", train["warm_start"]
    earlier = stack.xcom(RETRAIN, "stack-b", "train")
    assert earlier["warm_start"]["source"] == "base (none yet: from scratch)", earlier["warm_start"]


def test_the_serving_dag_runs_after_each_champion_move(
    stack: Stack, scheduled_run: dict[str, Any], base_run: dict[str, Any], observed: dict[str, Any]
) -> None:
    moves = [m["to"] for m in base_run["models"]["history"]]
    deadline = time.monotonic() + 300
    seen: list[str] = []
    while time.monotonic() < deadline:
        runs = stack.runs(SERVING)
        done = [r for r in runs if r["state"] == "success"]
        seen = [v for r in done for v in stack.xcom(SERVING, r["dag_run_id"], "reload")["versions"]]
        if len(seen) >= len(moves) and all(r["state"] in ("success", "failed") for r in runs):
            break
        time.sleep(2)
    assert seen == moves, (seen, moves)
    runs = stack.runs(SERVING)
    assert {r["run_type"] for r in runs} == {"asset_triggered"}
    promoted = stack.task_instances(RETRAIN, scheduled_run["dag_run_id"])["promote"]
    assert when(runs[0]["start_date"]) >= when(promoted["end_date"])
    observed["serving_runs"] = [
        {"run_id": r["dag_run_id"], "start": r["start_date"], "versions": stack.xcom(SERVING, r["dag_run_id"], "reload")["versions"]}
        for r in runs
    ]  # fmt: skip


def test_the_runs_metrics_are_in_prometheus(
    stack: Stack, base_run: dict[str, Any], observed: dict[str, Any]
) -> None:
    successes = sum(1 for r in stack.runs(RETRAIN) if r["state"] == "success")
    assert successes == 4  # scheduled, A, B, the one on the new base
    runs = stack.wait_prom(
        'ranker_runs_total{job="ranker_retrain"}',
        lambda result: (
            {r["metric"]["status"]: float(r["value"][1]) for r in result}.get("success") == successes
        ),
    )
    by_status = {r["metric"]["status"]: float(r["value"][1]) for r in runs}
    assert by_status.get("failed", 0.0) == 0.0  # the killed try was retried: no failed run
    champion = stack.prom_query('ranker_last_run_timestamp_seconds{job="ranker_retrain"}')
    assert (
        champion and float(champion[0]["value"][1]) >= when(stack.runs(RETRAIN)[0]["start_date"]).timestamp()
    )
    observed["prometheus"] = {"ranker_runs_total": by_status}


def test_a_rejected_run_says_so_in_the_grid_and_in_the_gate_log(stack: Stack, pair: dict[str, Any]) -> None:
    """Run B's candidate is judged against A's champion, which was trained on B's eval day: the gate
    rejects it (an unfair comparison fails closed); an operator sees it without opening XComs."""
    tis = stack.task_instances(RETRAIN, "stack-b")
    outcome = {
        t: (tis[t]["state"], tis[t]["task_display_name"])
        for t in ("promote", "record_rejection", "keep_champion")
    }
    assert outcome == {
        "promote": ("skipped", "outcome: promoted"),
        "record_rejection": ("success", "outcome: REJECTED by the gate"),
        "keep_champion": ("skipped", "outcome: champion kept"),
    }, outcome
    report = stack.xcom(RETRAIN, "stack-b", "gate")
    assert report["decision"] == "reject" and report["failed_checks"], report
    log = stack.log(RETRAIN, "stack-b", "gate", 1)
    for check in report["checks"]:
        verdict = "pass" if check["passed"] else "FAIL"
        assert f"gate check {check['name']}: {verdict}  value=" in log, (check, log[-3000:])
    failed = ", ".join(report["failed_checks"])
    champion = report["champion"]["version"]
    assert (
        f"gate reject: candidate {report['candidate']['version']} vs champion {champion}; failed: {failed}"
        in log
    )
    assert "Successfully loaded" not in log  # fbgemm's library-load chatter stays out of task logs
    assert "Successfully loaded" not in stack.log(RETRAIN, "stack-a", "train", 2)
    # the run's report beside its model: the same gate table
    run_dir = Path(stack.xcom(RETRAIN, "stack-b", "train")["run_dir"])
    text = (run_dir / "report.md").read_text()
    assert "REJECTED by the gate" in text and f"## Gate: reject (failed: {failed})" in text, text
    assert f"champion {champion}" in text


# -- the browser -------------------------------------------------------------------------------


def test_the_ui_in_a_headless_browser(
    stack: Stack, pair: dict[str, Any], rollback_run: dict[str, Any]
) -> None:
    browser = Browser()
    shots = {}
    try:
        browser.goto(f"{stack.api_url}/dags/{RETRAIN}")
        browser.wait_for("location.pathname.startsWith('/auth/login')", "be sent to the login page")
        browser.wait_for("document.querySelector('input[name=username]')", "see the login form")
        browser.type_into("input[name=username]", "admin")
        browser.type_into("input[name=password]", stack.password)
        browser.wait_for("!document.querySelector('button[type=submit]').disabled", "enable Sign in")
        browser.click("button[type=submit]")
        browser.wait_for(f"location.pathname === '/dags/{RETRAIN}'", "come back to the DAG after login")
        assert "_token" in {c["name"] for c in browser.cookies()}

        browser.wait_for_text("fail_run_if_a_step_failed")  # the grid's task rows
        browser.wait_for_text("ml-platform")  # the DAG header (owner)
        time.sleep(2)  # the grid's bars render after the data
        shots["grid"] = browser.screenshot(SCREENSHOTS / "grid.png")

        browser.goto(f"{stack.api_url}/dags/{RETRAIN}/runs/stack-a/tasks/train")
        browser.wait_for_text("continuing after epoch")
        time.sleep(1)
        shots["task_logs"] = browser.screenshot(SCREENSHOTS / "task-logs.png")

        # the rejected run: its grid column and task list, then the gate's checks in its log
        browser.goto(f"{stack.api_url}/dags/{RETRAIN}/runs/stack-b")
        browser.wait_for_text("outcome: REJECTED by the gate")
        time.sleep(2)
        shots["rejected_run"] = browser.screenshot(SCREENSHOTS / "rejected-run.png")
        browser.goto(f"{stack.api_url}/dags/{RETRAIN}/runs/stack-b/tasks/gate")
        browser.wait_for_text("gate reject: candidate")
        time.sleep(1)
        shots["rejected_gate_log"] = browser.screenshot(SCREENSHOTS / "rejected-gate-log.png")

        # Debian's prometheus 2.42 is built without the React UI (/alerts is a 404): its classic UI
        alerts = f"{stack.prometheus_url}/alerts"
        if requests.get(alerts, timeout=30).status_code == 404:
            alerts = f"{stack.prometheus_url}/classic/alerts"
        browser.goto(alerts)
        browser.wait_for_text("RankerNoSuccessfulRetrain")
        time.sleep(1)
        shots["prometheus_alerts"] = browser.screenshot(SCREENSHOTS / "prometheus-alerts.png")
    finally:
        browser.close()
    for name, png in shots.items():
        assert png[:8] == b"\x89PNG\r\n\x1a\n", name
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert (width, height) == (1600, 1000), name
        assert len(png) > 20_000, (name, len(png))  # a rendered page, not a blank one


# -- the docs' examples, verbatim (last: they add a run) ---------------------------------------


def _run_doc_blocks(stack: Stack, tag: str, timeout: float) -> subprocess.CompletedProcess[str]:
    script = "\n".join(doc_blocks(tag))
    # only what the blocks source themselves: no RANKER_*/AIRFLOW* of the caller's shell
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKER_", "AIRFLOW"))}
    env["STACK_DIR"] = str(stack.root)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"the {tag} blocks failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def test_the_cli_finds_the_stacks_workspace_after_sourcing_env_sh(
    stack: Stack, base_run: dict[str, Any], observed: dict[str, Any]
) -> None:
    out = _run_doc_blocks(stack, "stack-cli-example", timeout=120).stdout
    models = ranker(stack.home, "models", "list")
    # the stack's registry, not ./var's: RANKER_HOME came from env.sh
    assert f"registry {stack.home / 'registry'}  champion: {models['champion']}" in out, out
    assert re.search(r'^ranker_runs_total\{.*status="success".*\} \d', out, re.M), out
    observed["stack_cli_example_output"] = out


def test_the_rest_examples_in_the_docs_run_verbatim(
    stack: Stack, base_run: dict[str, Any], observed: dict[str, Any]
) -> None:
    started = time.monotonic()
    out = _run_doc_blocks(stack, "rest-example", timeout=budget("retrain_run", runs=2)).stdout
    observed["rest_example"] = {"seconds": round(time.monotonic() - started, 1), "output": out}
    assert "is_paused: False" in out
    created = re.search(r"^(rest-\d{8}T\d{6}) queued$", out, re.M)
    assert created, out
    run_id = created.group(1)
    run = stack.run(RETRAIN, run_id)
    assert (run["state"], run["conf"]) == (
        "success",
        {"window_end": LAST_DAY.isoformat(), "dry_run": True},
    ), run
    assert re.search(rf"^\d\d:\d\d:\d\d {run_id} success$", out, re.M), out
    assert re.search(r"^  keep_champion +success$", out, re.M), out  # a dry run keeps the champion
    report = stack.xcom(RETRAIN, run_id, "gate")
    assert f"  gate {report['decision']}: candidate {report['candidate']['version']} vs champion" in out, out
    assert sum(line.startswith("  gate check ") for line in out.splitlines()) == len(report["checks"]), out
