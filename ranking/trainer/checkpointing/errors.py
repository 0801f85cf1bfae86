"""The checkpoint error, apart from the modules that raise it (``checkpoint`` and ``compact``
import each other's functions no more than this)."""

from __future__ import annotations

from ranking.core.errors import RankerError


class CheckpointError(RankerError):
    """A checkpoint is missing, corrupt (checksum mismatch) or does not fit."""
