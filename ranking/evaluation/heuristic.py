"""A non-learned ranker scored wherever a model is (the gate, the backtest, the review, `ranker
report`): what a learned model has to beat to be worth its training.

The shipped heuristic ranks a slate by each pin's smoothed 28-day save rate,
``(saves_28d + k p) / (impressions_28d + k)``, with ``p`` the save rate of the day's pins over their
own 28 days before (the eval rows' ``pin_stats__saves_28d`` / ``pin_stats__impressions_28d`` summed:
nothing from the eval day itself) and ``k`` pseudo-impressions (``[heuristic] smoothing``). On a real
log of mostly first-seen users (issue 31, log A) the trained models did exactly as well as this
one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ranking.core.errors import RankerError

if TYPE_CHECKING:
    import pandas as pd

HEURISTICS: tuple[str, ...] = ("pin_save_rate",)
HEURISTIC_POLICIES: tuple[str, ...] = ("warn", "fail")
# the eval partition's columns the heuristics read (beside request_id, pin_id, saved)
HEURISTIC_COLUMNS: tuple[str, ...] = ("pin_stats__saves_28d", "pin_stats__impressions_28d")


@dataclass(frozen=True)
class HeuristicConfig:
    """The ``[heuristic]`` config section: which non-learned ranker, and what beating it means."""

    name: str = "pin_save_rate"
    smoothing: float = 20.0  # k: pseudo-impressions at the day's prior save rate
    # the gate's beats_heuristic check: the candidate's save HIT@3 lift over the heuristic must
    # exceed ``margin`` (its CI's lower bound under rule "ci"); warn: a warning, fail: a rejection
    margin: float = 0.0
    policy: str = "warn"

    def __post_init__(self) -> None:
        problems = []
        if self.name not in HEURISTICS:
            problems.append(f"name must be one of {', '.join(HEURISTICS)}, got {self.name!r}")
        if not (math.isfinite(self.smoothing) and self.smoothing > 0):
            problems.append(f"smoothing must be a finite number > 0, got {self.smoothing}")
        if not math.isfinite(self.margin):
            problems.append(f"margin must be finite, got {self.margin}")
        if self.policy not in HEURISTIC_POLICIES:
            problems.append(f"policy must be warn or fail, got {self.policy!r}")
        if problems:
            raise RankerError("invalid heuristic configuration: " + "; ".join(problems))


def heuristic_scores(examples: pd.DataFrame, config: HeuristicConfig) -> pd.DataFrame:
    """A score frame (``request_id, pin_id, saved, score``) of the heuristic on the eval day's
    examples (which must hold :data:`HEURISTIC_COLUMNS`; a pin without a snapshot counts 0)."""
    missing = [c for c in ("request_id", "pin_id", "saved", *HEURISTIC_COLUMNS) if c not in examples.columns]
    if missing:
        raise RankerError(f"the heuristic {config.name} needs the eval day's columns {missing}")
    saves = examples["pin_stats__saves_28d"].fillna(0).to_numpy(dtype=np.float64)
    shown = examples["pin_stats__impressions_28d"].fillna(0).to_numpy(dtype=np.float64)
    prior = float(saves.sum() / shown.sum()) if shown.sum() > 0 else 0.0
    score = (saves + config.smoothing * prior) / (shown + config.smoothing)
    out = examples[["request_id", "pin_id", "saved"]].copy()
    out["score"] = score
    return out
