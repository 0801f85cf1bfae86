"""A leftover (what `ranker gc` may remove) and the two facts about it read from the disk: its
age and size, and whether a live process holds it. Shared by the janitor (what killed writers
left) and the retention (what is old enough to prune)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NotRequired, cast

from typing_extensions import TypedDict


@dataclass(frozen=True)
class Leftover:
    kind: str  # temp | export-scratch | incomplete-version | incomplete-checkpoint | expired-*
    where: str  # a local path, or a registry-relative folder for incomplete versions
    modified: float  # the newest modification time of anything it holds (epoch seconds)
    bytes: int
    held: bool = False  # a live process holds it (its lock, or its claim's pid on this host)


class LeftoverRow(TypedDict):
    """A leftover as `ranker gc` reports it: its fields, and ``why`` it was kept or not removed."""

    kind: str
    where: str
    modified: float
    bytes: int
    held: bool
    why: NotRequired[str]


def leftover_row(leftover: Leftover, why: str | None = None) -> LeftoverRow:
    row = cast(LeftoverRow, asdict(leftover))
    if why is not None:
        row["why"] = why
    return row


def tree_stats(path: Path) -> tuple[float, int]:
    """(newest mtime, total bytes) of a file or a folder tree, without following links."""
    st = path.lstat()
    newest, total = st.st_mtime, st.st_size if path.is_file() else 0
    if path.is_dir() and not path.is_symlink():
        for folder, _, files in os.walk(path):
            newest = max(newest, Path(folder).lstat().st_mtime)
            for name in files:
                fst = (Path(folder) / name).lstat()
                newest, total = max(newest, fst.st_mtime), total + fst.st_size
    return newest, total


def lock_held(lock_path: Path) -> bool:
    """Whether a live process holds the flock on ``lock_path`` (False when there is none)."""
    from filelock import FileLock, Timeout

    if not lock_path.exists():
        return False
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    lock.release()
    return False
