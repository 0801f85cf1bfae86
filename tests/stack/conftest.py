"""The real stack for the tests in this folder: one stack and one workspace per session.

`infra/stack/stack.py up` in a temporary folder of its own (free ports, its own Postgres cluster),
with a second DAG bundle (tests/stack/dags: the serving DAG scheduled on the champion Asset) and
short retry delays, ranker_pretrain and ranker_recipe_review daily instead of weekly
(RANKER_PRETRAIN_CRON, RANKER_REVIEW_CRON; their scheduled runs are then for yesterday on any
weekday); stopped and removed at the end (kept with RANKER_KEEP_STACK=1). The workspace is the one
`stack.py up --small-workspace` builds (what `make stack` offers): 10 synthetic days ending
yesterday (UTC), so the scheduled run's eval day (yesterday) is in the source, and a ranker.toml
with 5-day windows and a 3-day review of two recipes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stack_client import RANKER_BIN, REPO, TODAY, Stack, budget, stack_cli

OBSERVATIONS = REPO / "var" / "stack-test-observations.json"


def _missing_servers() -> list[str]:
    missing = [b for b in ("prometheus", "prometheus-pushgateway", "chromium") if shutil.which(b) is None]
    if not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")) and shutil.which("pg_ctl") is None:
        missing.append("postgresql")
    return missing


@pytest.fixture(scope="session")
def observed() -> Iterator[dict[str, Any]]:
    """What the tests saw (times, states), written to var/stack-test-observations.json for the docs."""
    notes: dict[str, Any] = {"date": TODAY.isoformat()}
    yield notes
    OBSERVATIONS.parent.mkdir(parents=True, exist_ok=True)
    OBSERVATIONS.write_text(json.dumps(notes, indent=2, default=str) + "\n")


@pytest.fixture(scope="session")
def stack(observed: dict[str, Any]) -> Iterator[Stack]:
    missing = _missing_servers()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian packages; run infra/ci/install-servers.sh)")
    if not RANKER_BIN.exists():
        pytest.skip(f"{RANKER_BIN} is missing: run `make setup`")
    root = Path(tempfile.mkdtemp(prefix="ranker-stack-test-"))
    root.chmod(0o755)  # as root, the cluster belongs to the postgres user, who must enter the folder
    home = root / "workspace"
    try:
        started = time.monotonic()
        up = stack_cli(
            root, "up",
            "--ranker-home", str(home),
            "--small-workspace",
            "--extra-dags", str(Path(__file__).parent / "dags"),
            "--scrape-interval", "1s",
            "--env", "RANKER_TASK_RETRIES=1",
            "--env", "RANKER_RETRY_DELAY_S=2",
            # daily, not weekly: unpausing ranker_pretrain then fires a run for yesterday on any
            # weekday; at 01:00 as in production (the same time as the retrain would give both
            # scheduled runs the same run id, and so the same run folder in the workspace)
            "--env", "RANKER_PRETRAIN_CRON=0 1 * * *",
            # at midnight: its scheduled run's last eval day is yesterday at any hour, and its 3
            # days before it fit the workspace's 10 (a weekly run's could be a week back)
            "--env", "RANKER_REVIEW_CRON=0 0 * * *",
            timeout=budget("workspace") + budget("stack_up"),
        )  # fmt: skip
        assert up.returncode == 0, f"stack up failed:\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
        assert "small workspace ready" in up.stdout, up.stdout
        assert (home / "ranker.toml").is_file() and any((home / "source").iterdir())
        observed["workspace_and_stack_up_seconds"] = round(time.monotonic() - started, 1)
        observed["stack_up_output"] = up.stdout.replace(
            json.loads((root / "secrets.json").read_text())["admin_password"], "<password>"
        )
        client = Stack.connect(root, home)
        for dag_id in (
            "ranker_retrain",
            "ranker_rollback",
            "ranker_pretrain",
            "ranker_recipe_review",
            "ranker_serving_reload",
        ):
            _wait_parsed(client, dag_id)
        client.unpause("ranker_serving_reload")
        client.unpause("ranker_rollback")
        yield client
    finally:
        down = stack_cli(root, "down")
        print(down.stdout, down.stderr)
        if os.environ.get("RANKER_KEEP_STACK") != "1":
            shutil.rmtree(root, ignore_errors=True)


def _wait_parsed(stack: Stack, dag_id: str, timeout: float = budget("dag_parsed")) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.request("GET", f"/dags/{dag_id}").status_code == 200:
            return
        time.sleep(1)
    errors = stack.get("/importErrors")
    raise TimeoutError(f"{dag_id} not parsed after {timeout} s; import errors: {errors}")
