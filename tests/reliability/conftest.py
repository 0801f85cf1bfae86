"""Fault fixtures: real full and read-only filesystems (a tmpfs mounted for the test, as root),
constructed training runs and registries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import Tmpfs, mount_tmpfs, umount
from registry_fixtures import make_run, registry_url

__all__ = ["Tmpfs", "make_run", "registry_url"]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    """A real 64 MiB tmpfs (needs root and mount(8); skipped elsewhere)."""
    point = tmp_path / "tmpfs"
    if not mount_tmpfs(point, "64m"):
        pytest.skip("needs root: cannot mount a tmpfs here (mount(8) as root)")
    try:
        yield Tmpfs(point)
    finally:
        umount(point)
