"""Atomic local writes: write to a temp file/dir beside the target, fsync, then rename.

A reader never sees a half-written file: either the old content, or the complete new one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_NO_DIR_FSYNC = {errno.EINVAL, errno.ENOTSUP, errno.EACCES}
_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the kernel reports it (Linux >= 4.7);
    elsewhere set-and-restore under a lock (threads of this module never see a zero umask)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def new_temp_file(parent: str | os.PathLike[str], name: str) -> tuple[int, Path]:
    """An open temp file beside ``parent/name`` with the mode a plain ``open()`` would give it
    (0666 & ~umask): mkstemp's 0600 would hide published files from readers running as another
    user (node-exporter reading the metrics textfile, a serving job reading the registry)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        exc.filename = str(Path(parent) / name)  # the file we meant to write, not a temp name
        raise
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, Path(tmp)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename or create in ``path`` durable. Filesystems that cannot fsync a directory
    (EINVAL, ENOTSUP: some network and FUSE mounts) are tolerated; any other error is raised."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        if exc.errno in _NO_DIR_FSYNC:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_DIR_FSYNC:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temp file path beside ``target``; on success rename it over ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_path = new_temp_file(target.parent, target.name)
    os.close(fd)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, target)
        fsync_dir(target.parent)
    except OSError as exc:
        # a failed write (ENOSPC, EROFS) must name the file it was for, not an anonymous temp
        if exc.filename is None or str(exc.filename) == str(tmp_path):
            exc.filename = str(target)
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


def atomic_write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(target, text.encode())


def atomic_write_json(target: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(target, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temp directory beside ``target``; on success rename it to ``target``.

    ``target`` must not exist yet (directories are published once; a re-build replaces the
    old one only after the new one is complete).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as exc:
        exc.filename = str(target)
        raise
    os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp's 0700, as for files above
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path) as f:
        return json.load(f)
