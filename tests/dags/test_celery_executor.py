"""The compose stack's executor settings load Airflow's CeleryExecutor and its Celery app with the
Redis broker, in this (the Airflow image's) environment: the lock's celery stack fits Airflow."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dag_test_paths import REPO

_PROBE = """
import json
from airflow.executors.executor_loader import ExecutorLoader
from airflow.providers.celery.executors.celery_executor_utils import app
cls, _ = ExecutorLoader.import_default_executor_cls()
options = app.conf.broker_transport_options or {}
print(json.dumps({"executor": cls.__name__, "module": cls.__module__, "broker": app.conf.broker_url,
                  "backend": str(app.conf.result_backend),
                  "visibility_timeout": options.get("visibility_timeout")}))
"""


def _compose_airflow_env() -> dict[str, str]:
    """x-airflow-common's environment with the ${VAR:-default} defaults filled in."""
    common = yaml.safe_load((REPO / "docker-compose.yml").read_text())["x-airflow-common"]
    return {
        k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(v))
        for k, v in common["environment"].items()
        if k.startswith(("AIRFLOW__CORE__EXECUTOR", "AIRFLOW__CELERY"))
    }


def test_compose_executor_settings_load_the_celery_executor(tmp_path: Path) -> None:
    if importlib.util.find_spec("airflow.providers.celery") is None:
        pytest.skip(
            "apache-airflow-providers-celery not installed: make setup installs requirements/airflow.lock"
        )
    compose = _compose_airflow_env()
    assert compose["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    env = {**os.environ, **compose, "AIRFLOW_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["executor"] == "CeleryExecutor" and got["module"].startswith("airflow.providers.celery")
    assert got["broker"] == compose["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/1"
    assert got["backend"] == compose["AIRFLOW__CELERY__RESULT_BACKEND"]
    assert int(got["visibility_timeout"]) == int(
        compose["AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT"]
    )
