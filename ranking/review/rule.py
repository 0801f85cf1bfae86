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

Served lifts are the evidence that counts (what production would have served) but the noisiest: a
served model is a day older than the candidate and the gate's choices add their own variance. When
no served gain resolves, :func:`decide` weighs the candidates' lifts instead, only for recipes whose
candidates the gate would have promoted (at least ``min_promotion_rate`` of the days replayed, and
served models not significantly worse): on a real grocery log (issue 31) base-j's candidates were
+3.14% [+1.62%, +4.67%] over naive while its served models were +1.47% [-0.26%, +3.12%], and the
review kept naive. A recipe whose candidates the gate mostly rejects would not serve them, so its
candidates' gain does not count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

from ranking.config.model import ReviewSection
from ranking.core.errors import RankerError

RULE = (
    "Recommended: the cheapest recipe whose served lift's CI is not below the best recipe's lower"
    " bound (best: the highest lift, less cost_weight per extra multiple of the cheapest recipe's"
    " training time); no significant served gain -> the same on the candidates' lifts, of the recipes"
    " whose candidates the gate promoted on at least min_promotion_rate of the days and whose served"
    " lift is not significantly negative; no significant gain there either -> the baseline."
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
    significant: bool = False  # the best recipe's gain resolved (its lower bound above 0)
    basis: str = "served"  # the lifts it was decided on: "served" | "candidate"


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
    return Recommendation(
        chosen.recipe, best.recipe, tuple(e.recipe for e in eligible), reason, best.significant_gain
    )


def decide(
    served: Sequence[Evidence] | None,
    candidates: Sequence[Evidence],
    promotion_rates: Mapping[str, float | None],
    *,
    baseline: str,
    cost_weight: float = 0.0,
    min_promotion_rate: float = ReviewSection().min_promotion_rate,
) -> Recommendation:
    """The review's rule (module docstring): on the served lifts where the best resolves, else on
    the candidates' lifts of the recipes the gate would have promoted; ``served`` None: a
    candidate-only review (no gate replayed), decided on the candidates alone."""
    if served is None:
        return replace(recommend(candidates, cost_weight, baseline), basis="candidate")
    on_served = recommend(served, cost_weight, baseline)
    if on_served.significant:
        return on_served
    served_by = {e.recipe: e for e in served}
    admitted: list[Evidence] = []
    refused: dict[str, str] = {}  # recipe -> why its candidates do not count
    for e in candidates:
        rate, s = promotion_rates.get(e.recipe), served_by.get(e.recipe)
        if e.recipe == baseline:
            admitted.append(e)
        elif s is None:
            refused[e.recipe] = "no served evidence"
        elif rate is None or rate < min_promotion_rate:
            shown = "no" if rate is None else f"{100 * rate:.0f}% of its"
            refused[e.recipe] = f"the gate promoted {shown} candidates (< {100 * min_promotion_rate:.0f}%)"
        elif s.ci[1] < 0:
            refused[e.recipe] = f"its served models lost significantly ({_interval(s)})"
        else:
            admitted.append(e)
    if baseline in {e.recipe for e in admitted}:
        on_candidates = recommend(admitted, cost_weight, baseline)
        if on_candidates.significant:
            return replace(
                on_candidates,
                basis="candidate",
                reason=f"no served gain resolves (best served: {_interval(served_by[on_served.best])});"
                f" on the candidates, which the gate would have promoted: {on_candidates.reason}",
            )
    uncounted = [
        f"{_interval(e)}: {refused[e.recipe]}"
        for e in candidates
        if e.significant_gain and e.recipe in refused
    ]
    if uncounted:
        return replace(
            on_served,
            reason=f"{on_served.reason}; candidates that gained but do not count: {'; '.join(uncounted)}",
        )
    return on_served


def minimum_detectable_effect(ci: Sequence[float], level: float, power: float = 0.8) -> float:
    """The smallest true lift that evidence this precise resolves (its lower bound above 0) with
    probability ``power``: (z_(1-a/2) + z_power) standard errors, the standard error read off the
    CI's width (normal approximation: a bootstrap CI of a ratio is only roughly symmetric)."""
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    return (z + NormalDist().inv_cdf(power)) * (ci[1] - ci[0]) / (2 * z)


def days_to_detect(mde: float, days: int, effect: float) -> int | None:
    """Eval days the same replay would need to detect ``effect`` (the standard error falls as
    1/sqrt(days): the bootstrap resamples days); None when nothing was measured."""
    if mde <= 0 or days <= 0 or effect <= 0:
        return None
    return max(days, math.ceil(days * (mde / effect) ** 2))


def _interval(e: Evidence) -> str:
    return f"{e.recipe} {_pct(e.lift)} [{_pct(e.ci[0])}, {_pct(e.ci[1])}]"


def _desc(name: str) -> tuple[int, ...]:
    # max() with a name tie-break that prefers the alphabetically first name
    return tuple(-ord(c) for c in name)


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"
