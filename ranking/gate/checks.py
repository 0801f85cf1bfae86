"""Champion/challenger promotion gate: a pure function from score frames to a report.

Inputs are per-impression score frames (``request_id, pin_id, saved, score``) of the candidate
and, when there is one, the champion and the anchors (recent champions), all on the same eval day.
Every check is reported with its value, threshold, interval and a sentence; the decision is
``pass`` only if every check passed. Comparisons are non-inferiority tests on a paired bootstrap
over requests by default (``rule = "ci"``), or on the point estimates (``rule = "point"``).
Defaults and their rationale: docs/registry.md.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict, get_args

import numpy as np
from pydantic import JsonValue, ValidationError

from ranking.core.errors import RankerError
from ranking.core.summaries import GateRule, GateThresholds
from ranking.evaluation.heuristic import HeuristicConfig
from ranking.evaluation.metrics import OfflineMetrics, compute_metrics, hits_per_request
from ranking.evaluation.scores import SCORE_COLUMNS
from ranking.gate.bootstrap import PairedIntervals, hit_change_vs_mean, paired_bootstrap, slice_changes

if TYPE_CHECKING:
    import pandas as pd


class GateInputError(RankerError):
    """The score frames cannot be compared (missing columns, different rows or labels)."""


RULES: tuple[str, ...] = get_args(GateRule)


class GateConfig(GateThresholds):
    """The thresholds the checks read: :class:`~ranking.core.summaries.GateThresholds`, where each
    default and limit is written; a value out of its limits is a :class:`RankerError` (exit 2)."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']} (got {e['input']!r})"
                for e in exc.errors(include_url=False)
            ]
            raise RankerError("invalid gate configuration: " + "; ".join(problems)) from None

    def to_dict(self) -> dict[str, JsonValue]:
        """As the verdict, the step summary and the gate suite's report write it (JSON)."""
        return self.model_dump()


# the first gate (before issue 23): the best of the last 5 champions as the anchor, none of the
# reference, trend, pooled, leakage, window-age and slice checks; kept for side-by-side backtests
OLD_GATE = GateConfig(
    tolerance=0.05,
    anchor_champions=5,
    reference_champions=0,
    trend_days=0,
    pool_days=1,
    max_lift=0.0,
    max_window_lag_days=0,
    slice_guard=False,
)


@dataclass(frozen=True)
class PastComparison:
    """An earlier eval day's comparison of that day's candidate with that day's champion (from its
    gate verdict): the pooled check averages them when one day's CI is too wide."""

    eval_date: dt.date
    relative_change: float
    ci: tuple[float, float]


# the report's parts as the verdict and the `gate` step summary record them (GateSummary's parts in
# ranking.core.summaries, less the versions only the I/O edge knows: ranking.gate.run adds them)


class CheckRow(TypedDict):
    name: str
    passed: bool
    value: float | None
    threshold: float | list[float] | None
    detail: str
    ci: list[float] | None
    warning: bool


class MetricsRow(TypedDict):
    """``OfflineMetrics`` of a model on the eval day (``version``: added by ranking.gate.run)."""

    version: NotRequired[str | None]
    save_hit_at_3: float
    auc: float
    ne: float
    log_loss: float
    calibration: float
    base_rate: float
    rows: int
    requests_with_save: int


class CandidateRow(MetricsRow):
    random_save_hit_at_3: float


class AnchorRow(MetricsRow):
    relative_change: float | None
    ci: list[float] | None
    considered: list[str]
    left_out: NotRequired[dict[str, str]]  # versions that could not be compared, and why


class ReferenceRow(TypedDict):
    models: dict[str, float]
    mean_save_hit_at_3: float
    relative_change: float | None
    ci: list[float] | None


class HeuristicRow(MetricsRow):
    name: str
    relative_change: float | None
    ci: list[float] | None
    champion_relative_change: float | None
    margin: float
    policy: str


class SliceRow(TypedDict):
    """One slice (``SliceSummary``): the champion's fields only when there is one, the
    heuristic's only when it was scored."""

    name: str
    requests_with_save: int
    candidate: float | None
    whole_slates: bool
    heuristic: NotRequired[float | None]
    champion: NotRequired[float | None]
    relative_change: NotRequired[float | None]
    ci: NotRequired[list[float] | None]
    judged: NotRequired[bool]
    judged_ci: NotRequired[list[float] | None]
    loss_p: NotRequired[float | None]


class GateReportBody(TypedDict):
    """:meth:`GateReport.to_dict`: the report as the verdict and the step summary record it."""

    decision: str
    checks: list[CheckRow]
    failed_checks: list[str]
    warnings: list[str]
    candidate: CandidateRow
    champion: MetricsRow | None
    relative_change: float | None
    ci: list[float] | None
    eval_date: str | None
    config: dict[str, JsonValue]
    anchor: AnchorRow | None
    reference: ReferenceRow | None
    heuristic: HeuristicRow | None
    slices: list[SliceRow] | None


def metrics_row(metrics: OfflineMetrics) -> MetricsRow:
    return MetricsRow(
        save_hit_at_3=metrics.save_hit_at_3, auc=metrics.auc, ne=metrics.ne, log_loss=metrics.log_loss,
        calibration=metrics.calibration, base_rate=metrics.base_rate, rows=metrics.rows,
        requests_with_save=metrics.requests_with_save,
    )  # fmt: skip


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    value: float | None
    threshold: float | list[float] | None
    detail: str
    ci: list[float] | None = None  # the paired bootstrap interval of ``value``'s statistic
    warning: bool = False  # passed, but worth an operator's look (an event; the leakage check's)

    def to_dict(self) -> CheckRow:
        return CheckRow(
            name=self.name, passed=self.passed, value=self.value, threshold=self.threshold,
            detail=self.detail, ci=self.ci, warning=self.warning,
        )  # fmt: skip


@dataclass(frozen=True)
class TrainingWindow:
    """Days ``[start, end)`` a model was trained on."""

    start: dt.date
    end: dt.date

    def covers(self, day: dt.date) -> bool:
        return self.start <= day < self.end

    def __str__(self) -> str:
        return f"[{self.start}, {self.end})"


@dataclass(frozen=True)
class GateReport:
    decision: str  # pass | reject
    checks: list[Check]
    candidate: CandidateRow
    champion: MetricsRow | None
    relative_change: float | None  # of save HIT@3, candidate vs champion
    ci: list[float] | None  # paired bootstrap interval of relative_change
    eval_date: str | None
    config: dict[str, JsonValue] = field(default_factory=dict)  # GateConfig.to_dict(): written as JSON only
    anchor: AnchorRow | None = None  # the anchor version, its metrics, change and CI
    reference: ReferenceRow | None = None  # the reference models' HIT@3, their mean, change, CI
    heuristic: HeuristicRow | None = None  # the non-learned ranker's metrics and the lifts over it
    slices: list[SliceRow] | None = None  # each slice's save HIT@3, change and CIs (None: not cut)

    @property
    def passed(self) -> bool:
        return self.decision == "pass"

    @property
    def failed_checks(self) -> list[str]:
        return [c.name for c in self.checks if not c.passed]

    @property
    def warnings(self) -> list[str]:
        return [c.name for c in self.checks if c.warning]

    def to_dict(self) -> GateReportBody:
        return {
            "decision": self.decision,
            "checks": [c.to_dict() for c in self.checks],
            "failed_checks": self.failed_checks,
            "warnings": self.warnings,
            "candidate": self.candidate,
            "champion": self.champion,
            "relative_change": self.relative_change,
            "ci": self.ci,
            "eval_date": self.eval_date,
            "config": self.config,
            "anchor": self.anchor,
            "reference": self.reference,
            "heuristic": self.heuristic,
            "slices": self.slices,
        }


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------


def _require_columns(frame: pd.DataFrame, who: str) -> None:
    missing = [c for c in SCORE_COLUMNS if c not in frame.columns]
    if missing:
        raise GateInputError(f"{who} scores lack columns {missing} (need {list(SCORE_COLUMNS)})")
    if len(frame) == 0:
        raise GateInputError(f"{who} scores are empty")
    if frame.duplicated(["request_id", "pin_id"]).any():
        n = int(frame.duplicated(["request_id", "pin_id"]).sum())
        raise GateInputError(f"{who} scores have {n} duplicate (request_id, pin_id) rows")


def align_scores(candidate: pd.DataFrame, champion: pd.DataFrame) -> pd.DataFrame:
    """Join the two frames row for row: columns request_id, pin_id, saved, cand, champ.

    Both must score exactly the same impressions with the same labels; anything else means they
    were not evaluated on the same day and the comparison would be meaningless.
    """
    _require_columns(candidate, "candidate")
    _require_columns(champion, "champion")
    keys = ["request_id", "pin_id"]
    merged = candidate[[*keys, "saved", "score"]].merge(
        champion[[*keys, "saved", "score"]],
        on=keys,
        how="outer",
        suffixes=("_cand", "_champ"),
        indicator=True,
    )
    only_cand = int((merged["_merge"] == "left_only").sum())
    only_champ = int((merged["_merge"] == "right_only").sum())
    if only_cand or only_champ:
        raise GateInputError(
            f"candidate and champion were not scored on the same impressions: {only_cand} rows only in the "
            f"candidate's scores, {only_champ} only in the champion's (same eval day and window?)"
        )
    differing = int((merged["saved_cand"] != merged["saved_champ"]).sum())
    if differing:
        raise GateInputError(
            f"candidate and champion scores disagree on the label of {differing} impressions"
        )
    return merged.rename(columns={"saved_cand": "saved", "score_cand": "cand", "score_champ": "champ"})[
        [*keys, "saved", "cand", "champ"]
    ].sort_values(keys, kind="mergesort", ignore_index=True)


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------


def random_ranking_hit_at_k(request_ids: Any, labels: Any, k: int = 3) -> float:
    """Expected save HIT@k of a model that ranks each slate uniformly at random.

    A saved pin in a slate of n lands in the top k with probability min(k, n) / n.
    """
    _, codes = np.unique(np.asarray(request_ids), return_inverse=True)
    codes = np.asarray(codes).reshape(-1)
    y = np.asarray(labels, dtype=np.float64)
    sizes = np.bincount(codes)
    saves = np.bincount(codes, weights=y, minlength=len(sizes))
    total = saves.sum()
    if total <= 0:
        return float("nan")
    return float((saves * np.minimum(k, sizes) / sizes).sum() / total)


def _ratio_change(new: float, old: float) -> float | None:
    if not (math.isfinite(new) and math.isfinite(old)) or old <= 0:
        return None
    return new / old - 1.0


# --------------------------------------------------------------------------------------------
# the gate
# --------------------------------------------------------------------------------------------


def _fmt(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.4f}"


def _sanity_checks(scores: np.ndarray, calibration: float, config: GateConfig) -> list[Check]:
    finite = np.isfinite(scores)
    in_range = finite & (scores >= 0.0) & (scores <= 1.0)
    bad = int(len(scores) - in_range.sum())
    checks = [
        Check(
            "scores_finite",
            bad == 0,
            float(bad),
            0.0,
            f"{bad} of {len(scores)} scores are NaN, infinite or outside [0, 1]",
        )
    ]
    std = float(np.std(scores[finite])) if finite.any() else 0.0
    checks.append(
        Check(
            "scores_not_constant",
            std > config.min_score_std,
            std,
            config.min_score_std,
            f"score standard deviation {std:.3g} (must exceed {config.min_score_std:g})",
        )
    )
    cal_ok = math.isfinite(calibration) and config.calibration_low <= calibration <= config.calibration_high
    checks.append(
        Check(
            "calibration",
            cal_ok,
            calibration if math.isfinite(calibration) else None,
            [config.calibration_low, config.calibration_high],
            f"mean prediction / base save rate = {_fmt(calibration)} "
            f"(bounds [{config.calibration_low:g}, {config.calibration_high:g}])",
        )
    )
    return checks


def _fairness_check(
    eval_date: dt.date | None,
    candidate_window: TrainingWindow | None,
    champion_window: TrainingWindow | None,
    config: GateConfig,
) -> Check:
    problems = []
    if eval_date is None:
        problems.append("the eval day is unknown")
    else:
        for who, window in (("champion", champion_window), ("candidate", candidate_window)):
            if window is None:
                problems.append(f"the {who}'s training window is unknown")
            elif window.covers(eval_date):
                problems.append(f"the {who} was trained on the eval day {eval_date} (window {window})")
    if not problems:
        return Check(
            "fair_comparison", True, None, None, f"neither model was trained on the eval day {eval_date}"
        )
    detail = "unfair comparison: " + "; ".join(problems)
    if config.allow_unfair:
        return Check("fair_comparison", True, None, None, detail + " — overridden (--allow-unfair)")
    return Check("fair_comparison", False, None, None, detail + " — fails closed (override: --allow-unfair)")


def _interval_text(ci: list[float] | None, config: GateConfig) -> str:
    shown = f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "n/a"
    return f"{config.ci_level:.0%} paired bootstrap CI {shown} ({config.bootstrap_samples} resamples)"


def _non_inferior(
    name: str,
    what: str,
    point: float | None,
    ci: list[float] | None,
    floor: float,
    config: GateConfig,
) -> Check:
    """A higher-is-better change must stay >= ``floor``: its CI's lower bound (rule "ci") or its
    point estimate (rule "point")."""
    if config.rule == "ci":
        value = ci[0] if ci else None
        rule = f"the CI's lower bound must be >= {floor:g}"
    else:
        value = point
        rule = f"must be >= {floor:g}; CI reported"
    passed = value is not None and math.isfinite(value) and value >= floor
    detail = f"{what} {_fmt(point)}, {_interval_text(ci, config)}: {rule}"
    return Check(name, passed, value, floor, detail, ci)


def _within(
    name: str, what: str, point: float, ci: list[float] | None, ceiling: float, config: GateConfig
) -> Check:
    """A lower-is-better rise must stay <= ``ceiling``: its CI's upper bound (rule "ci") or its point."""
    if config.rule == "ci":
        value = ci[1] if ci else None
        rule = f"the CI's upper bound must be <= {ceiling:g}"
    else:
        value = point if math.isfinite(point) else None
        rule = f"max {ceiling:g}; CI reported"
    passed = value is not None and math.isfinite(value) and value <= ceiling
    detail = f"{what} {_fmt(point)}, {_interval_text(ci, config)}: {rule}"
    return Check(name, passed, value, ceiling, detail, ci)


class _ChampionChecks(NamedTuple):
    """The candidate vs the champion, in the report's order."""

    change: Check  # save HIT@3's relative change (replaced by the pooled one when pooled)
    auc_drop: Check
    ne_rise: Check


def _comparison_checks(
    cand: OfflineMetrics, champ: OfflineMetrics, intervals: PairedIntervals, config: GateConfig
) -> _ChampionChecks:
    change = _ratio_change(cand.save_hit_at_3, champ.save_hit_at_3)
    return _ChampionChecks(
        change=_non_inferior(
            "save_hit_at_3_change",
            f"save HIT@3 {_fmt(cand.save_hit_at_3)} vs champion {_fmt(champ.save_hit_at_3)}: relative change",
            change,
            intervals.hit_change,
            -config.tolerance,
            config,
        ),
        auc_drop=_within(
            "auc_drop",
            f"AUC {_fmt(cand.auc)} vs champion {_fmt(champ.auc)}: drop",
            champ.auc - cand.auc,
            intervals.auc_drop,
            config.max_auc_drop,
            config,
        ),
        ne_rise=_within(
            "ne_rise",
            f"NE {_fmt(cand.ne)} vs champion {_fmt(champ.ne)}: rise",
            cand.ne - champ.ne,
            intervals.ne_rise,
            config.max_ne_rise,
            config,
        ),
    )


class _Scored(NamedTuple):
    """A model compared with the candidate: its version and its scores row for row with the eval day."""

    version: str
    scores: np.ndarray


class _Anchor(NamedTuple):
    """The best anchor: its version, its metrics on the eval day and its scores row for row with it."""

    version: str
    metrics: OfflineMetrics
    scores: np.ndarray


def _best_anchor(
    frame: pd.DataFrame, anchors: Mapping[str, pd.DataFrame], request_ids: np.ndarray, labels: np.ndarray
) -> _Anchor | None:
    """The anchor with the highest save HIT@3 on this day, its scores aligned to ``frame``. Ties go
    to the first version in sorted order."""
    best: _Anchor | None = None
    for version in sorted(anchors):
        aligned = align_scores(
            frame[["request_id", "pin_id", "saved"]].assign(score=frame["cand"]), anchors[version]
        )
        scores = aligned["champ"].to_numpy(dtype=np.float64)
        metrics = compute_metrics(request_ids, labels, scores)
        if best is None or metrics.save_hit_at_3 > best.metrics.save_hit_at_3:
            best = _Anchor(version, metrics, scores)
    return best


def _aligned_scores(frame: pd.DataFrame, other: pd.DataFrame) -> np.ndarray:
    """``other``'s scores in ``frame``'s row order (same impressions and labels, else an error)."""
    aligned = align_scores(frame[["request_id", "pin_id", "saved"]].assign(score=frame["cand"]), other)
    return aligned["champ"].to_numpy(dtype=np.float64)


class _Pooled(NamedTuple):
    """The change vs the champion pooled over several eval days."""

    mean: float  # inverse-variance mean of the days' relative changes
    ci: list[float]  # its interval, at the gate's level
    days: int  # eval days pooled (this one included)


def _pooled(
    today: float | None, today_ci: list[float] | None, past: Sequence[PastComparison], config: GateConfig
) -> _Pooled | None:
    """Inverse-variance mean of today's change and the last ``pool_days - 1`` recorded ones (each
    day's standard error from its CI's width), with its interval at the same level; None when the
    day's CI is narrow enough or there is nothing to pool."""
    if config.pool_days <= 1 or today is None or not today_ci:
        return None
    if today_ci[1] - today_ci[0] <= config.pool_ci_width:
        return None
    usable = [p for p in past if math.isfinite(p.relative_change) and p.ci[1] > p.ci[0]]
    days = [(today, today_ci[1] - today_ci[0])] + [
        (p.relative_change, p.ci[1] - p.ci[0]) for p in usable[-(config.pool_days - 1) :]
    ]
    if len(days) < 2:
        return None
    z = float(NormalDist().inv_cdf(0.5 + config.ci_level / 2))
    weights = np.array([(2 * z / width) ** 2 for _, width in days])
    mean = float(np.dot(weights, [c for c, _ in days]) / weights.sum())
    half = z / math.sqrt(float(weights.sum()))
    return _Pooled(mean, [mean - half, mean + half], len(days))


@dataclass(frozen=True)
class LeakEvidence:
    """What says whether a candidate could have seen the eval day, besides the size of its lift:
    the window's data-level leak checks (the data validation: training rows timed at or after the
    eval day, snapshots dated after their impression) and the lineage (every model it was
    warm-started from, and their own, trained on days before the eval day). A check that did not
    run counts as not passed. A candidate whose recipe a review has just switched to is expected
    to differ from a champion of another recipe by more than a day's noise."""

    data_checked: bool
    data_clean: bool
    lineage_checked: bool
    lineage_clean: bool
    review_switch: str | None = None  # the review whose recipe switch this candidate is the first of
    detail: str = ""

    @property
    def cleared(self) -> bool:
        if self.review_switch:
            return True
        return self.data_checked and self.data_clean and self.lineage_checked and self.lineage_clean

    def why_not(self) -> str:
        """What is missing for the evidence to clear a large lift."""
        missing = []
        if not self.data_checked:
            missing.append("the window's data-level leak check did not run")
        elif not self.data_clean:
            missing.append("the window's data-level leak check found a leak")
        if not self.lineage_checked:
            missing.append("the lineage is not known")
        elif not self.lineage_clean:
            missing.append("a model in its lineage was trained on the eval day")
        return "; ".join(missing)


def _leakage_check(
    hit: float,
    champion_hit: float,
    lift: float | None,
    ci: list[float] | None,
    config: GateConfig,
    evidence: LeakEvidence | None,
) -> Check:
    """Too good to be true: the point lift over the champion above ``max_lift`` and (rule ``ci``)
    significantly above zero — a rejection only when nothing else says the candidate is clean.
    Honest daily candidates measured -8 % .. +7.6 % against their champion on 54 backtest days,
    eval-day leaks +11 % .. +30 % (docs/backtest/gate-suite); but an honestly better recipe shows
    +11 % too (issue 30), so a large lift is judged by the data-level leak check and the lineage
    (``evidence``), never by its size alone: when both ran and found nothing, or the candidate is a
    review's recipe switch, it is a warning, not a rejection. The significance condition keeps a
    small eval day's noise (±30 %) from reading as a leak."""
    significant = config.rule != "ci" or ci is None or ci[0] > 0
    large = lift is not None and math.isfinite(lift) and lift > config.max_lift and significant
    numbers = (
        f"save HIT@3 {_fmt(hit)} vs champion {_fmt(champion_hit)}: lift {_fmt(lift)}, "
        f"{_interval_text(ci, config)}"
    )
    if not large:
        return Check(
            "leakage", True, lift, config.max_lift,
            f"{numbers}; not above {config.max_lift:g}{' and significant' if config.rule == 'ci' else ''}",
            ci,
        )  # fmt: skip
    if evidence is not None and evidence.cleared:
        why = (
            f"the first candidate of review {evidence.review_switch}'s recipe switch"
            if evidence.review_switch
            else "the window's data-level leak checks and the lineage found no leak"
        )
        return Check(
            "leakage", True, lift, config.max_lift,
            f"{numbers}; above {config.max_lift:g} — a warning, not a rejection: {why}"
            + (f" ({evidence.detail})" if evidence.detail else ""),
            ci, warning=True,
        )  # fmt: skip
    missing = evidence.why_not() if evidence is not None else "no data-level leak check or lineage was given"
    return Check(
        "leakage", False, lift, config.max_lift,
        f"{numbers}; above {config.max_lift:g}{' and significant' if config.rule == 'ci' else ''} in one day's"
        f" retrain is too good to be true while nothing shows it clean ({missing}): trained on the eval day?"
        " labels joined into features?",
        ci,
    )  # fmt: skip


_HEURISTIC = HeuristicConfig()  # the [heuristic] section's defaults


@dataclass(frozen=True)
class Heuristic:
    """A non-learned ranker's scores on the eval day (``ranking.evaluation.heuristic``) and what
    beating it means: the candidate's save HIT@3 lift over it above ``margin`` (the CI's lower
    bound under rule "ci"); ``policy`` warn: a warning when it does not, fail: a rejection."""

    name: str
    scores: pd.DataFrame
    margin: float = _HEURISTIC.margin
    policy: str = _HEURISTIC.policy


def _heuristic_comparison(
    day: _EvalDay,
    cand_hit: float,
    champ_scores: np.ndarray | None,
    heuristic: Heuristic,
    config: GateConfig,
) -> tuple[Check, HeuristicRow, np.ndarray]:
    """The ``beats_heuristic`` check, the report's heuristic summary (its metrics, the
    candidate's lift over it with a paired-bootstrap CI, the champion's lift) and its scores row
    for row with the eval day."""
    keys = ["request_id", "pin_id"]
    merged = day.frame[keys].merge(
        heuristic.scores[[*keys, "score"]], on=keys, how="left", validate="one_to_one"
    )
    if merged["score"].isna().any():
        raise GateInputError(f"the heuristic {heuristic.name} was not scored on every eval impression")
    scores = merged["score"].to_numpy(dtype=np.float64)
    metrics = compute_metrics(day.request_ids, day.labels, scores)
    # HIT@3 only (the AUC and NE intervals of paired_bootstrap are most of its cost), on the same resamples
    ci = hit_change_vs_mean(
        day.request_ids, day.labels, day.cand_scores, [scores],
        samples=config.bootstrap_samples, level=config.ci_level, seed=config.seed,
    )  # fmt: skip
    lift = _ratio_change(cand_hit, metrics.save_hit_at_3)
    champion_lift = None
    if champ_scores is not None:
        champ_hit = compute_metrics(day.request_ids, day.labels, champ_scores).save_hit_at_3
        champion_lift = _ratio_change(champ_hit, metrics.save_hit_at_3)
    judged = ci[0] if config.rule == "ci" and ci else lift
    beats = judged is not None and judged > heuristic.margin
    detail = (
        f"save HIT@3 {_fmt(cand_hit)} vs the {heuristic.name} heuristic {_fmt(metrics.save_hit_at_3)}: lift "
        f"{_fmt(lift)}, {_interval_text(ci, config)}; must exceed {heuristic.margin:g}"
        f"{' (its lower bound)' if config.rule == 'ci' else ''}"
    )
    if beats:
        check = Check("beats_heuristic", True, lift, heuristic.margin, detail, ci)
    elif heuristic.policy == "warn":
        check = Check(
            "beats_heuristic", True, lift, heuristic.margin,
            detail + " — a warning (policy warn): the model is no better than a one-line ranker", ci, warning=True,
        )  # fmt: skip
    else:
        check = Check(
            "beats_heuristic", False, lift, heuristic.margin, detail + " — the model is no better", ci
        )
    summary = HeuristicRow(
        name=heuristic.name,
        **metrics_row(metrics),
        relative_change=lift,
        ci=ci,
        champion_relative_change=champion_lift,
        margin=heuristic.margin,
        policy=heuristic.policy,
    )
    return check, summary, scores


def _slice_masks(day: _EvalDay, slices: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each slice's impressions of the eval day, row for row with ``day.frame``."""
    keys = ["request_id", "pin_id"]
    names = [c for c in slices.columns if c not in keys]
    merged = day.frame[keys].merge(slices, on=keys, how="left", validate="one_to_one")
    if merged[names].isna().to_numpy().any():
        raise GateInputError("the slices do not cover every eval impression")
    return {name: merged[name].to_numpy(dtype=bool) for name in names}


def _slice_hit(day: _EvalDay, scores: np.ndarray, mask: np.ndarray) -> tuple[float | None, int]:
    """A slice's save HIT@3 (its saved pins in the top 3 of their whole slate; None without a
    saved pin) and its requests with a save."""
    hits, saves = hits_per_request(day.request_ids, day.labels * mask, scores)
    total = float(saves.sum())
    return (float(hits.sum() / total) if total else None), int((saves > 0).sum())


def _p_value(p: float, samples: int) -> str:
    """A bootstrap p-value: 0 of the resamples reads as below one resample's share."""
    return f"< {1 / samples:.2g}" if p == 0 else f"{p:.3g}"


def _slice_comparison(
    day: _EvalDay,
    champ_scores: np.ndarray | None,
    heuristic_scores: np.ndarray | None,
    slices: pd.DataFrame,
    config: GateConfig,
) -> tuple[Check | None, list[SliceRow]]:
    """Every slice's save HIT@3 for the candidate, the champion and the heuristic, the change vs
    the champion with its paired interval, and the ``slice_guard`` check (None: no champion, or
    the guard is off)."""
    masks = _slice_masks(day, slices)
    codes = np.unique(day.request_ids, return_inverse=True)[1].reshape(-1)
    slate_sizes = np.bincount(codes)
    rows: list[SliceRow] = []
    for name, mask in masks.items():
        hit, requests = _slice_hit(day, day.cand_scores, mask)
        in_slice = np.bincount(codes, weights=mask, minlength=len(slate_sizes))
        whole = bool(np.all((in_slice == 0) | (in_slice == slate_sizes)))
        rows.append(SliceRow(name=name, requests_with_save=requests, candidate=hit, whole_slates=whole))
        if heuristic_scores is not None:
            rows[-1]["heuristic"] = _slice_hit(day, heuristic_scores, mask)[0]
    if champ_scores is None:
        return None, rows
    judged = [
        i
        for i, r in enumerate(rows)
        if config.slice_guard
        and r["requests_with_save"] >= config.slice_min_requests
        and (r["whole_slates"] or config.slice_guard_partial)
    ]
    # one-sided, as the gate's other CI checks (a two-sided 90% interval = a one-sided 5% test),
    # split over the slices judged
    alpha = (1.0 - config.ci_level) / 2.0 / max(1, len(judged))
    judged_level = 1.0 - 2.0 * alpha
    changes = slice_changes(
        day.request_ids, day.labels, day.cand_scores, champ_scores, list(masks.values()),
        samples=config.bootstrap_samples, level=config.ci_level, judged_level=judged_level,
        tolerance=config.slice_tolerance, seed=config.seed,
    )  # fmt: skip
    failed = []
    for i, (row, change) in enumerate(zip(rows, changes, strict=True)):
        row["champion"] = change.reference if math.isfinite(change.reference) else None
        row["relative_change"] = change.relative_change
        row["ci"] = change.ci
        row["judged"] = i in judged
        row["judged_ci"] = change.judged_ci if i in judged else None
        row["loss_p"] = change.loss_p if i in judged else None
        if i in judged and change.loss_p < alpha:
            failed.append(row)
    if not config.slice_guard:
        return None, rows
    worst = min(
        (rows[i] for i in judged if rows[i]["relative_change"] is not None),
        key=lambda r: r.get("relative_change") or 0.0,  # None is filtered out above
        default=None,
    )
    test = f"p < {alpha:.2g} ({(1 - config.ci_level) / 2:g} over {len(judged)} slices judged)"
    scope = "" if config.slice_guard_partial else "of whole slates "

    def _named(r: SliceRow) -> str:
        ci = r["judged_ci"]
        interval = f", {judged_level:.1%} interval [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
        return (
            f"{r['name']} ({r['requests_with_save']} requests with a save) {_fmt(r['relative_change'])}"
            f"{interval}, p {_p_value(r.get('loss_p') or 0.0, config.bootstrap_samples)}"
        )

    if failed:
        detail = (
            f"lost more than {config.slice_tolerance:g} of its save HIT@3 vs the champion, {test}: "
            + "; ".join(_named(r) for r in failed)
        )
    elif worst is None:
        detail = f"no slice {scope}has {config.slice_min_requests} requests with a save: none judged"
    else:
        detail = (
            f"{len(judged)} slices {scope}judged (>= {config.slice_min_requests} requests with a save), none lost more "
            f"than {config.slice_tolerance:g} at {test}; the worst: {_named(worst)}"
        )
    check = Check(
        "slice_guard", not failed, worst["relative_change"] if worst else None, -config.slice_tolerance, detail,
        worst["judged_ci"] if worst else None,
    )  # fmt: skip
    return check, rows


@dataclass(frozen=True)
class _EvalDay:
    """The impressions the models are judged on: the candidate's (and the champion's) scores row
    for row, the requests as int codes and the labels."""

    frame: pd.DataFrame  # request_id, pin_id, saved, cand (and champ)
    request_ids: np.ndarray  # int codes: grouping strings is 5-10x slower
    labels: np.ndarray
    cand_scores: np.ndarray


def _eval_day(candidate: pd.DataFrame, champion: pd.DataFrame | None) -> _EvalDay:
    _require_columns(candidate, "candidate")
    if champion is not None:
        frame = align_scores(candidate, champion)
    else:
        frame = candidate[["request_id", "pin_id", "saved", "score"]].rename(columns={"score": "cand"})
    cand_scores = frame["cand"].to_numpy(dtype=np.float64)
    request_ids = frame["request_id"].factorize()[0]
    labels = frame["saved"].to_numpy(dtype=np.float64)
    if not np.isin(labels, (0.0, 1.0)).all():
        raise GateInputError("the 'saved' column must hold 0/1 labels")
    if labels.sum() == 0:
        raise GateInputError("the eval day has no saves: save HIT@3 is undefined")
    return _EvalDay(frame, request_ids, labels, cand_scores)


def _floor_check(hit: float, random_hit: float, config: GateConfig) -> Check:
    """Save HIT@3 at least the absolute floor and the random ranking's plus the minimum lift."""
    floor = max(config.min_save_hit_at_3, random_hit * (1.0 + config.min_lift_over_random))
    return Check(
        "save_hit_at_3_floor",
        math.isfinite(hit) and hit >= floor,
        hit,
        floor,
        f"save HIT@3 {_fmt(hit)} vs floor {_fmt(floor)} = max({config.min_save_hit_at_3:g}, random ranking "
        f"{_fmt(random_hit)} × {1 + config.min_lift_over_random:g})",
    )


def _window_age_check(
    eval_date: dt.date | None, candidate_window: TrainingWindow | None, config: GateConfig
) -> Check | None:
    """The candidate's window ends at most max_window_lag_days before the eval day; None when the
    check is off or the days are unknown."""
    if config.max_window_lag_days <= 0 or eval_date is None or candidate_window is None:
        return None
    lag = (eval_date - candidate_window.end).days
    return Check(
        "window_age",
        lag <= config.max_window_lag_days,
        float(lag),
        float(config.max_window_lag_days),
        f"the candidate's window {candidate_window} ends {lag} day(s) before the eval day {eval_date}"
        f" (max {config.max_window_lag_days}): an old window is a stale model",
    )


def _candidate_checks(
    day: _EvalDay,
    metrics: OfflineMetrics,
    random_hit: float,
    config: GateConfig,
    eval_date: dt.date | None,
    candidate_window: TrainingWindow | None,
) -> list[Check]:
    """The checks on the candidate alone: sanity, the value floor, the window's age."""
    checks = _sanity_checks(day.cand_scores, metrics.calibration, config)
    checks.append(_floor_check(metrics.save_hit_at_3, random_hit, config))
    age = _window_age_check(eval_date, candidate_window, config)
    if age is not None:
        checks.append(age)
    return checks


def _reference_scores(
    day: _EvalDay, champ_scores: np.ndarray, references: Mapping[str, pd.DataFrame], config: GateConfig
) -> dict[str, np.ndarray]:
    """The reference models' scores: the champion and the champions before it (newest first)."""
    ref_scores = {"champion": champ_scores}
    for version in list(references)[: max(0, config.reference_champions - 1)]:
        ref_scores[version] = _aligned_scores(day.frame, references[version])
    return ref_scores


def _trend_scores(
    day: _EvalDay, trend_reference: tuple[str, pd.DataFrame] | None, config: GateConfig
) -> _Scored | None:
    """The trend model (``run_gate``'s ``trend_reference``: its version and its scores) aligned to
    the eval day; None when the check is off or there is none."""
    if config.trend_days > 0 and trend_reference is not None:
        version, scores = trend_reference
        return _Scored(version, _aligned_scores(day.frame, scores))
    return None


def _pooled_change_check(
    hit: float,
    champ_hit: float,
    change: float | None,
    ci: list[float] | None,
    history: Sequence[PastComparison],
    config: GateConfig,
) -> Check | None:
    """The change check on the pooled days (rule "ci" and the day's CI too wide); None otherwise."""
    pooled = _pooled(change, ci, history, config) if config.rule == "ci" else None
    if pooled is None:
        return None
    return _non_inferior(
        "save_hit_at_3_change",
        f"save HIT@3 {_fmt(hit)} vs champion {_fmt(champ_hit)}: the day's CI "
        f"{_interval_text(ci, config)} is wider than {config.pool_ci_width:g}, so pooled over "
        f"{pooled.days} eval days (inverse-variance mean of each day's candidate vs champion)",
        pooled.mean,
        pooled.ci,
        -config.tolerance,
        config,
    )


class _AnchorJudged(NamedTuple):
    """The anchor check and the report's anchor summary."""

    check: Check
    summary: AnchorRow


class _ReferenceJudged(NamedTuple):
    """The reference check and the report's reference summary."""

    check: Check
    summary: ReferenceRow


def _anchor_check(
    hit: float,
    anchor: _Anchor,
    hit_change: list[float] | None,
    considered: Mapping[str, pd.DataFrame],
    config: GateConfig,
) -> _AnchorJudged:
    """The candidate vs the best anchor: the check and the report's anchor summary."""
    version, anchor_metrics = anchor.version, anchor.metrics
    anchor_change = _ratio_change(hit, anchor_metrics.save_hit_at_3)
    check = _non_inferior(
        "anchor",
        f"save HIT@3 {_fmt(hit)} vs anchor {version} (best of the last {len(considered)} "
        f"champions on this day) {_fmt(anchor_metrics.save_hit_at_3)}: relative change",
        anchor_change,
        hit_change,
        -config.anchor_tolerance,
        config,
    )
    summary = AnchorRow(
        version=version,
        **metrics_row(anchor_metrics),
        relative_change=anchor_change,
        ci=hit_change,
        considered=sorted(considered),
    )
    return _AnchorJudged(check, summary)


def _reference_check(
    day: _EvalDay,
    hit: float,
    ref_scores: dict[str, np.ndarray],
    ref_hits: dict[str, float],
    config: GateConfig,
) -> _ReferenceJudged | None:
    """The candidate vs the mean of the reference models: the check and the report's reference
    summary; None when the check is off or there is only the champion (its own check)."""
    if not (config.reference_champions > 1 and len(ref_scores) > 1):
        return None
    mean_hit = float(np.mean(list(ref_hits.values())))
    ref_change = _ratio_change(hit, mean_hit)
    ref_ci = hit_change_vs_mean(
        day.request_ids,
        day.labels,
        day.cand_scores,
        list(ref_scores.values()),
        samples=config.bootstrap_samples,
        level=config.ci_level,
        seed=config.seed,
    )
    check = _non_inferior(
        "reference",
        f"save HIT@3 {_fmt(hit)} vs the mean of {len(ref_scores)} recent champion(s) on this day "
        f"{_fmt(mean_hit)}: relative change",
        ref_change,
        ref_ci,
        -config.reference_tolerance,
        config,
    )
    summary = ReferenceRow(
        models={v: h for v, h in ref_hits.items()},
        mean_save_hit_at_3=mean_hit,
        relative_change=ref_change,
        ci=ref_ci,
    )
    return _ReferenceJudged(check, summary)


def _trend_check(
    day: _EvalDay,
    hit: float,
    trend: _Scored,
    hit_change: list[float] | None,
    config: GateConfig,
) -> Check:
    """The candidate vs the champion served trend_days ago, scored today."""
    trend_hit = compute_metrics(day.request_ids, day.labels, trend.scores).save_hit_at_3
    return _non_inferior(
        "trend",
        f"save HIT@3 {_fmt(hit)} vs {trend.version}, the champion served {config.trend_days}+ days ago, "
        f"on this day {_fmt(trend_hit)}: relative change",
        _ratio_change(hit, trend_hit),
        hit_change,
        -config.trend_tolerance,
        config,
    )


@dataclass(frozen=True)
class _Comparison:
    """What the comparison with the champion adds to the report."""

    checks: list[Check]
    champion: MetricsRow
    relative_change: float | None
    ci: list[float] | None
    anchor: AnchorRow | None
    reference: ReferenceRow | None


@dataclass(frozen=True)
class _Others:
    """The models compared with the candidate besides the champion, as passed to run_gate."""

    anchors: Mapping[str, pd.DataFrame]
    references: Mapping[str, pd.DataFrame]
    trend: tuple[str, pd.DataFrame] | None
    history: Sequence[PastComparison]
    leak_evidence: LeakEvidence | None = None


@dataclass(frozen=True)
class _Intervals:
    """The candidate's paired bootstrap intervals against each model it is compared with, all from
    the same resamples (None: that model is not compared)."""

    champion: PairedIntervals
    anchor: PairedIntervals | None
    trend: PairedIntervals | None


def _paired_intervals(
    day: _EvalDay, champ_scores: np.ndarray, anchor: _Anchor | None, trend: _Scored | None, config: GateConfig
) -> _Intervals:
    """One paired bootstrap of the candidate against the champion, the anchor and the trend model
    (in that order: the resamples, and so the intervals, depend on it)."""
    compared = {"champion": champ_scores}
    if anchor is not None:
        compared["anchor"] = anchor.scores
    if trend is not None:
        compared["trend"] = trend.scores
    found = paired_bootstrap(
        day.request_ids,
        day.labels,
        day.cand_scores,
        list(compared.values()),
        samples=config.bootstrap_samples,
        level=config.ci_level,
        seed=config.seed,
    )
    named = dict(zip(compared, found, strict=True))
    return _Intervals(champion=named["champion"], anchor=named.get("anchor"), trend=named.get("trend"))


def _compare_with_champion(
    day: _EvalDay,
    cand_metrics: OfflineMetrics,
    fairness: Check,
    others: _Others,
    config: GateConfig,
) -> _Comparison:
    """The checks against the champion, the anchor, the reference models and the trend model (their
    intervals from the same bootstrap resamples), the pooled change and the leakage check."""
    champ_scores = day.frame["champ"].to_numpy(dtype=np.float64)
    champ_metrics = compute_metrics(day.request_ids, day.labels, champ_scores)
    anchor = _best_anchor(day.frame, others.anchors, day.request_ids, day.labels)
    ref_scores = _reference_scores(day, champ_scores, others.references, config)
    ref_hits = {
        v: compute_metrics(day.request_ids, day.labels, sc).save_hit_at_3 for v, sc in ref_scores.items()
    }
    trend = _trend_scores(day, others.trend, config)
    intervals = _paired_intervals(day, champ_scores, anchor, trend, config)
    hit = cand_metrics.save_hit_at_3
    relative_change = _ratio_change(hit, champ_metrics.save_hit_at_3)
    ci = intervals.champion.hit_change
    comparison = _comparison_checks(cand_metrics, champ_metrics, intervals.champion, config)
    pooled = _pooled_change_check(
        hit, champ_metrics.save_hit_at_3, relative_change, ci, others.history, config
    )
    if pooled is not None:
        comparison = comparison._replace(change=pooled)
    checks = [fairness, *comparison]
    anchor_judged = None
    if anchor is not None and intervals.anchor is not None:
        anchor_judged = _anchor_check(hit, anchor, intervals.anchor.hit_change, others.anchors, config)
        checks.append(anchor_judged.check)
    reference = _reference_check(day, hit, ref_scores, ref_hits, config)
    if reference is not None:
        checks.append(reference.check)
    if trend is not None and intervals.trend is not None:
        checks.append(_trend_check(day, hit, trend, intervals.trend.hit_change, config))
    if config.max_lift > 0:
        checks.append(
            _leakage_check(
                hit, champ_metrics.save_hit_at_3, relative_change, ci, config, others.leak_evidence
            )
        )
    return _Comparison(
        checks=checks,
        champion=metrics_row(champ_metrics),
        relative_change=relative_change,
        ci=ci,
        anchor=anchor_judged.summary if anchor_judged is not None else None,
        reference=reference.summary if reference is not None else None,
    )


def run_gate(
    candidate: pd.DataFrame,
    champion: pd.DataFrame | None,
    config: GateConfig | None = None,
    *,
    eval_date: dt.date | None = None,
    candidate_window: TrainingWindow | None = None,
    champion_window: TrainingWindow | None = None,
    anchors: Mapping[str, pd.DataFrame] | None = None,
    references: Mapping[str, pd.DataFrame] | None = None,
    trend_reference: tuple[str, pd.DataFrame] | None = None,
    history: Sequence[PastComparison] = (),
    leak_evidence: LeakEvidence | None = None,
    heuristic: Heuristic | None = None,
    slices: pd.DataFrame | None = None,
) -> GateReport:
    """Judge a candidate against the champion (or, on the first run, on absolute checks only),
    against the best of ``anchors`` (version -> scores of recent champions on the same day), the
    mean of the champion and ``references`` (the champions before it), the champion served
    ``trend_days`` ago (``trend_reference``), with ``history`` (earlier days' comparisons, oldest
    first) for the pooled decision, ``leak_evidence`` (the window's data-level leak checks and the
    lineage) for a lift too large to be believed on its own, ``heuristic`` (a non-learned
    ranker's scores) for the ``beats_heuristic`` check and ``slices`` (``request_id, pin_id`` and a
    boolean column per slice: ranking.evaluation.slices) for the slice metrics and guard."""
    config = config or GateConfig()
    day = _eval_day(candidate, champion)
    cand_metrics = compute_metrics(day.request_ids, day.labels, day.cand_scores)
    random_hit = random_ranking_hit_at_k(day.request_ids, day.labels)
    candidate_summary = CandidateRow(**metrics_row(cand_metrics), random_save_hit_at_3=random_hit)
    checks = _candidate_checks(day, cand_metrics, random_hit, config, eval_date, candidate_window)
    heuristic_summary = None
    champ_scores = day.frame["champ"].to_numpy(dtype=np.float64) if champion is not None else None
    heuristic_on_day = None
    if heuristic is not None:
        heuristic_check, heuristic_summary, heuristic_on_day = _heuristic_comparison(
            day, cand_metrics.save_hit_at_3, champ_scores, heuristic, config
        )
        checks.append(heuristic_check)
    slice_rows = None
    if slices is not None:
        slice_check, slice_rows = _slice_comparison(day, champ_scores, heuristic_on_day, slices, config)
        if slice_check is not None:
            checks.append(slice_check)
    comparison = None
    if champion is not None:
        fairness = _fairness_check(eval_date, candidate_window, champion_window, config)
        others = _Others(anchors or {}, references or {}, trend_reference, history, leak_evidence)
        comparison = _compare_with_champion(day, cand_metrics, fairness, others, config)
        checks += comparison.checks
    return GateReport(
        decision="pass" if all(c.passed for c in checks) else "reject",
        checks=checks,
        candidate=candidate_summary,
        champion=comparison.champion if comparison else None,
        relative_change=comparison.relative_change if comparison else None,
        ci=comparison.ci if comparison else None,
        eval_date=eval_date.isoformat() if eval_date else None,
        config=config.to_dict(),
        anchor=comparison.anchor if comparison else None,
        reference=comparison.reference if comparison else None,
        heuristic=heuristic_summary,
        slices=slice_rows,
    )
