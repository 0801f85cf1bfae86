"""The recommendation rule (pure): which recipe the evidence of a review supports.

Each recipe's evidence is its lift over the baseline recipe (relative change of served save
HIT@3, with the paired bootstrap CI; the baseline's own lift is 0 with CI [0, 0]) and its
training seconds per day. The best recipe is the one with the highest lift, less
``cost_weight`` for every extra multiple of the cheapest recipe's training time; the
recommendation is the cheapest recipe whose CI is not below the best's lower bound. When the
best gain is not significant (its lower bound at or below 0) the baseline is recommended: the
lifts are measured against it, and with no evidence of a gain an ordering by measured seconds
would follow the machine's load (two reviews of the same recipes on a shared machine ranked naive
slowest and fastest), not the recipes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ranking.core.errors import RankerError

RULE = (
    "Recommended: the cheapest recipe whose served lift's CI is not below the best recipe's lower"
    " bound (best: the highest lift, less cost_weight per extra multiple of the cheapest recipe's"
    " training time); no significant gain -> the baseline."
)


class ReviewError(RankerError):
    """A review cannot be planned, or its evidence cannot support a recommendation."""


@dataclass(frozen=True)
class Evidence:
    recipe: str
    lift: float  # relative change over the baseline (0 for the baseline itself)
    ci: tuple[float, float]
    seconds_per_day: float  # training (and base pretraining) seconds per replayed day
    days: int  # paired days the lift is measured over

    @property
    def significant_gain(self) -> bool:
        return self.ci[0] > 0


@dataclass(frozen=True)
class Recommendation:
    recipe: str
    best: str
    eligible: tuple[str, ...]  # the recipes not below the best's lower bound, cheapest first
    reason: str


def recommend(
    evidence: Sequence[Evidence], cost_weight: float = 0.0, baseline: str | None = None
) -> Recommendation:
    """The rule of the module docstring; ties go to the cheaper recipe, then by name. ``baseline``:
    the recipe the lifts are measured against (None: the cheapest stands in for it)."""
    if not evidence:
        raise ReviewError("no recipe has evidence to recommend from")
    if cost_weight < 0:
        raise ReviewError(f"cost_weight must be >= 0 (got {cost_weight})")
    cheapest_seconds = min(e.seconds_per_day for e in evidence)

    def net(e: Evidence) -> float:
        if cost_weight == 0 or cheapest_seconds <= 0:
            return e.lift
        return e.lift - cost_weight * (e.seconds_per_day / cheapest_seconds - 1)

    best = max(evidence, key=lambda e: (net(e), -e.seconds_per_day, _desc(e.recipe)))
    floor = best.ci[0]
    eligible = sorted((e for e in evidence if e.ci[1] >= floor), key=lambda e: (e.seconds_per_day, e.recipe))
    chosen = eligible[0]
    by_name = {e.recipe: e for e in evidence}
    if not best.significant_gain:
        if baseline in by_name:
            chosen = by_name[baseline]
        reason = (
            f"no significant gain: the best recipe, {best.recipe}, has {_pct(best.lift)}"
            f" [{_pct(best.ci[0])}, {_pct(best.ci[1])}]; "
            + (
                f"keep the baseline, {chosen.recipe}"
                if chosen.recipe == baseline
                else f"{chosen.recipe} is the cheapest ({chosen.seconds_per_day:.0f} s/day)"
            )
        )
    elif chosen.recipe == best.recipe:
        reason = (
            f"{best.recipe} is best ({_pct(best.lift)} [{_pct(best.ci[0])}, {_pct(best.ci[1])}]) and no"
            " cheaper recipe's CI reaches its lower bound"
        )
    else:
        reason = (
            f"{chosen.recipe} ({_pct(chosen.lift)} [{_pct(chosen.ci[0])}, {_pct(chosen.ci[1])}],"
            f" {chosen.seconds_per_day:.0f} s/day) is not below the lower bound of the best,"
            f" {best.recipe} ({_pct(best.ci[0])}), and costs less ({best.seconds_per_day:.0f} s/day)"
        )
    return Recommendation(chosen.recipe, best.recipe, tuple(e.recipe for e in eligible), reason)


def _desc(name: str) -> tuple[int, ...]:
    # max() with a name tie-break that prefers the alphabetically first name
    return tuple(-ord(c) for c in name)


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"
