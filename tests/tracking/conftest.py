"""Fixtures of the tracking tests: the real MLflow server (tests/support/mlflow_server.py) for
the session, and the registry's run folders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mlflow_server import MLFLOW, MlflowServer
from registry_fixtures import make_run

__all__ = ["make_run", "mlflow_server", "running_mlflow"]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    if not MLFLOW.is_file():
        pytest.skip(f"no MLflow server environment at {MLFLOW.parent.parent} (make setup installs it)")
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def running_mlflow(mlflow_server: MlflowServer) -> Iterator[MlflowServer]:
    """The session's server, running before and after the test (restarted if the test stopped it)."""
    if mlflow_server.proc is None:
        mlflow_server.start()
    yield mlflow_server
    if mlflow_server.proc is None:
        mlflow_server.start()
