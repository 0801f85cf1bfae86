"""Fault fixtures: real full and read-only filesystems (a tmpfs mounted for the test, as root),
constructed training runs and registries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_fixtures import make_run, registry_url

__all__ = ["make_run", "registry_url"]

REPO = Path(__file__).resolve().parents[2]


def _mount(point: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    point.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


def _umount(point: Path) -> None:
    subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


class Tmpfs:
    """A tmpfs of a fixed size at ``path``; ``read_only()`` remounts it read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True, capture_output=True)

    def fill(self) -> None:
        """Use every free byte: files that grow until ENOSPC (big writes, then single bytes)."""
        for name, chunk in ((".filler", 1 << 16), (".filler2", 1)):
            try:
                with open(self.path / name, "wb", buffering=0) as f:
                    while True:
                        f.write(b"\0" * chunk)
            except OSError:
                pass


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    """A real 64 MiB tmpfs (needs root and mount(8); skipped elsewhere)."""
    point = tmp_path / "tmpfs"
    if not _mount(point, "64m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield Tmpfs(point)
    finally:
        _umount(point)


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
    )
