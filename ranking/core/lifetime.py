"""A `ranker` process started by a replay (backtest, review) dies with the replay.

kill -9 of `ranker review` left its day's `ranker run` training on, and the re-run trained that day
again (issue 32). The replay names itself in ``RANKER_PARENT_PID``; the child asks the kernel
(Linux ``PR_SET_PDEATHSIG``) for SIGKILL when its parent dies, then checks the parent did not die
before that took effect. Elsewhere (another OS, no variable) nothing changes.
"""

from __future__ import annotations

import os
import signal
import sys

PARENT_PID_ENV = "RANKER_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Called first by a `ranker` process: SIGKILL when the replay that started it dies. The variable
    is removed here, so the processes this one starts do not inherit a parent that is not theirs."""
    parent = os.environ.pop(PARENT_PID_ENV, None)
    if not parent or not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not available here: the child outlives its parent as before
    if os.getppid() != int(parent):  # the parent died before the request took effect
        os._exit(137)
