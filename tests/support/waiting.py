"""Waiting on a condition instead of for a time. A test that sleeps "long enough" for another
process to get somewhere waits too long on a quiet machine and not long enough on a busy one; these
wait exactly until the thing happened, and fail naming what never did.

Plain Python (no project imports): the Airflow environment's tests may use it too.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str, timeout: float = 60.0, interval: float = 0.05) -> T:
    """Call ``condition`` until it returns something truthy, and return that; after ``timeout``
    seconds, raise TimeoutError naming ``what`` (an exception ``condition`` raises goes through)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class StartLine:
    """Worker processes that start their work together. Each worker, once set up (imported,
    connected), creates ``<folder>/ready-<its pid>`` and then polls for ``<folder>/go``;
    :meth:`release` waits until every worker is ready, fails at once when one exited before, and
    creates ``go``."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        self.folder = folder

    def release(self, workers: Sequence[subprocess.Popen[str]], timeout: float = 120.0) -> None:
        def all_ready() -> bool:
            for worker in workers:
                if worker.poll() is not None:
                    _, err = worker.communicate()
                    raise AssertionError(
                        f"worker {worker.pid} exited ({worker.returncode}) before the start line: "
                        f"{(err or '')[-2000:]}"
                    )
            return all((self.folder / f"ready-{worker.pid}").exists() for worker in workers)

        wait_until(all_ready, f"{len(workers)} workers at the start line in {self.folder}", timeout)
        (self.folder / "go").touch()
