"""The real MLflow tracking server (``.venv-mlflow``, full mlflow 3.17.2) for the tracking tests.

``mlflow_server`` is one server for the session (SQLite backend and artifacts in a temp folder,
a free port on 127.0.0.1); ``server.stop()`` / ``server.start()`` take it down and bring it back
on the same port and store within a test (a test that stops it must start it again: the fixture
``running_mlflow`` does so after each test that uses it).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # tests/support/ -> the repository
MLFLOW = REPO / ".venv-mlflow" / "bin" / "mlflow"
START_TIMEOUT = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    """A real ``mlflow server`` process group we started (and only ever stop by its own id)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def start(self) -> None:
        assert self.proc is None, "already running"
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(MLFLOW),
                    "server",
                    "--backend-store-uri",
                    f"sqlite:///{self.root / 'mlflow.db'}",
                    "--artifacts-destination",
                    str(self.root / "artifacts"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    "1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=env,
                start_new_session=True,  # its workers are in its group: stop() ends them all
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not self.healthy():
            if self.proc.poll() is not None:
                tail = self.log.read_text()[-3000:]
                self.proc = None
                raise AssertionError(f"mlflow server exited on start: {tail}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"mlflow server not healthy after {START_TIMEOUT:g} s: {self.log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None:
            return
        pgid = self.proc.pid  # its own session: the group id is its pid
        try:
            os.killpg(pgid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        self.proc = None
        # the port is closed before the call returns: a test that stops it sees it down at once
        deadline = time.monotonic() + 30
        while self.healthy() and time.monotonic() < deadline:
            time.sleep(0.1)
