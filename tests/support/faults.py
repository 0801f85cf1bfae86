"""Real faulty filesystems for fault tests: a tmpfs mounted for the test (as root), filled or
remounted read-only."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def mount_tmpfs(point: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    point.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


def umount(point: Path) -> None:
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
