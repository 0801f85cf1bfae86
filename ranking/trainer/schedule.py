"""Embedding update schedules: one phase per epoch, ``frozen`` (F) or ``joint`` (J).

F: no gradient reaches any embedding table and no table optimizer state changes (the pooled
embeddings are detached; lr=0 would not do: fused Adagrad/Adam still accumulate state).
J: tables and dense layers train together. Dense layers train in every epoch.
"""

from __future__ import annotations

from typing import Final

from ranking.core.summaries import Phase
from ranking.trainer.models.config import ConfigError

FROZEN: Final = "frozen"
JOINT: Final = "joint"

NAMED_SCHEDULES = ("delayed", "joint", "frozen", "joint_then_frozen")
_LETTERS: dict[str, Phase] = {"F": FROZEN, "J": JOINT}
# the default recipe's epoch count (F,J), chosen by the issue-13 backtest (docs/study.md)
DEFAULT_EPOCHS = 2


def resolve_schedule(spec: str, epochs: int | None = None) -> tuple[Phase, ...]:
    """Phases for each epoch.

    Named: ``delayed`` = F,J,J…; ``joint`` = J,J,J…; ``frozen`` = F,F,F…; ``joint_then_frozen`` =
    J,F,F…, for ``epochs`` epochs (default ``DEFAULT_EPOCHS``). Explicit: a comma list of F/J such as ``F,J,J``
    (its length is the epoch count; ``epochs``, when given, must agree).
    """
    spec = spec.strip()
    if spec in NAMED_SCHEDULES:
        n = DEFAULT_EPOCHS if epochs is None else epochs
        if n <= 0:
            raise ConfigError(f"epochs must be > 0, got {n}")
        named: dict[str, tuple[Phase, Phase]] = {
            "delayed": (FROZEN, JOINT),
            "joint": (JOINT, JOINT),
            "frozen": (FROZEN, FROZEN),
            "joint_then_frozen": (JOINT, FROZEN),
        }
        first, rest = named[spec]
        return (first, *([rest] * (n - 1)))
    letters = [p.strip().upper() for p in spec.split(",")]
    if not spec or any(p not in _LETTERS for p in letters):
        raise ConfigError(
            f"unknown schedule {spec!r}: use one of {', '.join(NAMED_SCHEDULES)} or a list such as F,J,J"
        )
    if epochs is not None and epochs != len(letters):
        raise ConfigError(f"schedule {spec!r} has {len(letters)} epochs but --epochs is {epochs}")
    return tuple(_LETTERS[p] for p in letters)


def schedule_letters(phases: tuple[str, ...]) -> str:
    """``("frozen", "joint")`` -> ``"F,J"`` (for summaries and logs)."""
    return ",".join("F" if p == FROZEN else "J" for p in phases)
