"""One exclusive lock for "only one at a time" (a run id, a run folder): the operating system's
(``filelock``), so a killed holder holds nothing; never waited for: a second comer is refused in
one line. The lock file is kept on release: deleting it would let a third comer lock a new file
while a second still holds the old one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ranking.core.errors import RankerError


@contextlib.contextmanager
def held_or_refused(path: Path, refusal: str) -> Iterator[None]:
    """Hold ``path`` for the ``with`` block; raise ``RankerError(refusal)`` if another holds it."""
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path, timeout=0, preserve_lock_file=True)
    try:
        lock.acquire()
    except Timeout:
        raise RankerError(refusal) from None
    try:
        yield
    finally:
        lock.release()
