"""Named points where a test kills this process (SIGKILL), to check that what a kill leaves re-runs
to the same end state (issue 32: a kill between a registration and its summary trained a second
version; one between the champion event and ``promote.json`` failed every re-run).

Points are keyed by step name (``<step>:start``, ``<step>:returned`` (it ran, its summary is not
written), ``<step>:recorded``) and a few named writes inside a step (``review:...``), so a test
that kills at each of them survives a restructuring of ``ranker run`` or ``ranker review``: it
reads the points a run passed from ``RANKER_KILL_POINTS_LOG`` and kills at each with
``RANKER_KILL_AT=<point>#<occurrence>``. Unset (always, outside tests), a point costs one
dictionary lookup. Processes a replay starts do not inherit either variable: the point names a
moment of *this* process.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

KILL_AT_ENV = "RANKER_KILL_AT"
POINTS_LOG_ENV = "RANKER_KILL_POINTS_LOG"
ENV = (KILL_AT_ENV, POINTS_LOG_ENV)
_seen: Counter[str] = Counter()


def reached(point: str) -> None:
    """Mark ``point``: logged with ``RANKER_KILL_POINTS_LOG``, and this process is SIGKILLed when
    it is the ``RANKER_KILL_AT`` one (``<point>#<n>``: its n-th time, 1 by default)."""
    kill_at, points_log = os.environ.get(KILL_AT_ENV), os.environ.get(POINTS_LOG_ENV)
    if not kill_at and not points_log:
        return
    _seen[point] += 1
    name = f"{point}#{_seen[point]}"
    if points_log:
        with open(points_log, "a") as out:
            out.write(name + "\n")
    if kill_at and (kill_at == name or (kill_at == point and _seen[point] == 1)):
        os.kill(os.getpid(), signal.SIGKILL)


def reset() -> None:
    """Forget the occurrences counted so far (a test running several commands in one process)."""
    _seen.clear()
