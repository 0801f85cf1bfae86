"""Smoke tests of the Airflow environment (.venv-airflow): the Task SDK imports and the metadata DB
migrates on a fresh SQLite AIRFLOW_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_task_sdk_and_prometheus_client_import() -> None:
    import prometheus_client
    from airflow.sdk import DAG, Asset, Param, dag, task  # noqa: F401

    assert prometheus_client.CollectorRegistry() is not None


def test_project_is_not_importable_in_airflow_env() -> None:
    """By design the DAGs call the `ranker` CLI; torch/feast must not leak into this image."""
    for name in ("torch", "feast", "ranking"):
        proc = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, timeout=60, cwd="/"
        )
        assert proc.returncode != 0, f"{name} is importable in .venv-airflow"


@pytest.mark.slow
def test_airflow_db_migrate_on_temporary_sqlite(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
    }
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run(
        [str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "airflow.db").stat().st_size > 100_000
    check = subprocess.run(
        [str(airflow), "db", "check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stderr[-3000:]
