"""Airflow test environment: a temporary AIRFLOW_HOME on SQLite, the repo's dags/ as DAGs folder.

The variables are set at import, before anything imports airflow (its configuration is read once).
Tests in this folder run in .venv-airflow and never import the project; they call .venv/bin/ranker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from dag_test_paths import DAGS

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="ranker-airflow-test-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(_AIRFLOW_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_AIRFLOW_HOME}/airflow.db",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # tests must not leave retries waiting on real backoff delays
        "RANKER_TASK_RETRIES": "0",
    }
)
if str(DAGS) not in sys.path:
    sys.path.insert(0, str(DAGS))  # what Airflow's bundle DagBag does for the DAGs folder


def airflow_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run(
        [str(airflow), *args], capture_output=True, text=True, timeout=timeout, env=os.environ
    )
    assert proc.returncode == 0, f"airflow {' '.join(args)} failed:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """A migrated metadata DB with the `training` pool (created once per session)."""
    airflow_cli("db", "migrate")
    airflow_cli("pools", "set", "training", "1", "ranker training jobs")
    yield _AIRFLOW_HOME


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)
