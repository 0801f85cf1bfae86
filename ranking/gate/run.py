"""The gate's I/O edge (`ranker gate`): find the eval day, score the candidate, the champion and
the recent champions (anchors, references, the champion served trend_days ago) there, with
the earlier days' comparisons from their verdicts, run the pure checks
(ranking/gate/checks.py) and record the verdict in the registry."""

from __future__ import annotations

import datetime as dt
import io
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.core.errors import RankerError, RegistryError
from ranking.core.summaries import GateSummary
from ranking.core.workspace import Workspace
from ranking.evaluation.heuristic import HEURISTIC_COLUMNS, HeuristicConfig, heuristic_scores
from ranking.evaluation.slices import SliceConfig, slice_frame
from ranking.gate.checks import (
    GateConfig,
    GateReport,
    GateReportBody,
    Heuristic,
    LeakEvidence,
    PastComparison,
    TrainingWindow,
    run_gate,
)
from ranking.registry import Registry, cache_dir, current_actor
from ranking.registry.records import Verdict, utc_now

if TYPE_CHECKING:
    import pandas as pd

    from ranking.registry.records import AliasEvent, TrainRecord, VersionRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateRequest:
    """Judge ``candidate`` against the current champion on ``end`` (default: its own eval day)."""

    ws: Workspace
    candidate: str
    registry: str | None = None  # registry URL (default: $RANKER_REGISTRY, else the workspace's)
    end: dt.date | None = None
    config: GateConfig = field(default_factory=GateConfig)
    run_id: str | None = None
    # the non-learned ranker scored beside the models (None: not scored)
    heuristic: HeuristicConfig | None = field(default_factory=HeuristicConfig)
    # the eval day's slices: their metrics and the slice guard (None: not cut)
    slices: SliceConfig | None = field(default_factory=SliceConfig)


@dataclass(frozen=True)
class GateResult:
    summary: GateSummary  # the report, the versions, the duration
    passed: bool


def _window(train: TrainRecord) -> TrainingWindow | None:
    try:
        return TrainingWindow(
            dt.date.fromisoformat(train["train_start"]), dt.date.fromisoformat(train["train_end"])
        )
    except (KeyError, TypeError, ValueError):
        return None


def recent_champions(history: Sequence[AliasEvent], n: int) -> list[str]:
    """The last ``n`` distinct versions the champion alias pointed at, newest first; a version a
    rollback moved away from is left out (production judged it bad)."""
    rolled_back = {e.from_version for e in history if e.action == "rollback" and e.from_version}
    out: list[str] = []
    for event in reversed(history):
        version = event.to_version
        if version in rolled_back or version in out:
            continue
        out.append(version)
        if len(out) == n:
            break
    return out


def trend_champion(reg: Registry, eval_day: dt.date, trend_days: int) -> str | None:
    """The champion served ``trend_days`` before ``eval_day``: of the versions the champion alias
    pointed at (a rolled-back one left out), the newest trained for a day before that."""
    cutoff = eval_day - dt.timedelta(days=trend_days)
    history = reg.history()
    rolled_back = {e.from_version for e in history if e.action == "rollback" and e.from_version}
    found: str | None = None
    for event in history:
        version = event.to_version
        if version in rolled_back:
            continue
        try:
            trained_for = reg.trained_for(version)
        except RankerError:
            continue
        if trained_for and dt.date.fromisoformat(trained_for) < cutoff:
            found = version
    return found


def past_comparisons(reg: Registry, eval_day: dt.date, n: int) -> list[PastComparison]:
    """The last ``n`` eval days before ``eval_day`` with a gate comparison (a verdict with a change
    and a CI against a champion), one per day (its latest version's), oldest first."""
    by_day: dict[str, PastComparison] = {}
    for version in sorted(reg.version_ids(), reverse=True):
        try:
            verdict = reg.verdict(version)
        except RankerError:
            continue
        if verdict is None:
            continue
        day, change, ci = verdict.eval_date, verdict.relative_change, verdict.ci
        if day is None or day >= eval_day.isoformat() or day in by_day:
            continue
        if change is None or ci is None or len(ci) != 2:
            continue
        by_day[day] = PastComparison(dt.date.fromisoformat(day), float(change), (float(ci[0]), float(ci[1])))
        if len(by_day) == n:
            break
    return [by_day[d] for d in sorted(by_day)]


def find_eval_parquet(ws: Workspace, day: dt.date, feature_version: str | None = None) -> Path:
    """The eval-day partition of a built window whose eval day is ``day``."""
    from features.window import read_window_manifest

    found: list[tuple[bool, Path]] = []
    for manifest_path in sorted(ws.windows.glob("*/manifest.json")):
        try:
            manifest = read_window_manifest(manifest_path)
        except (OSError, RankerError):  # not a window's manifest (any more): not one to judge on
            continue
        path = manifest.eval.path
        if manifest.eval.date == day and path.is_file():
            found.append((manifest.feature_version == feature_version, path))
    if not found:
        raise RankerError(
            f"no built window has eval day {day} under {ws.windows}: run `ranker features window --end {day}`"
        )
    found.sort(key=lambda t: not t[0])  # same feature definitions first
    return found[0][1]


def _score(checkpoint: Path, eval_parquet: Path) -> pd.DataFrame:
    from ranking.trainer.evaluation.scoring import score_checkpoint

    return score_checkpoint(checkpoint, eval_parquet)


def _candidate_scores(
    reg: Registry,
    ws: Workspace,
    version: str,
    eval_day: dt.date,
    own_eval_day: dt.date | None,
    feature_version: Any,
) -> pd.DataFrame:
    """The candidate's scores on the eval day: recorded at training when it is its own eval day,
    else scored on the eval day's window."""
    import pandas as pd

    if eval_day == own_eval_day:
        return pd.read_parquet(io.BytesIO(reg.read_file(version, "eval_scores.parquet")))
    parquet = find_eval_parquet(ws, eval_day, feature_version)
    return _score(reg.local_dir(version, cache_dir(ws)) / "model.pt", parquet)


@dataclass(frozen=True)
class _Champion:
    version: str
    scores: pd.DataFrame  # on the eval day
    window: TrainingWindow | None
    eval_parquet: Path  # the eval day's partition the earlier champions are scored on too


def _champion(
    reg: Registry, ws: Workspace, candidate: str, eval_day: dt.date, feature_version: Any
) -> _Champion | None:
    """The current champion scored on the eval day; None on the first run."""
    champion_version = reg.champion()
    if champion_version == candidate:
        raise RegistryError(f"{candidate} already is the champion: nothing to gate")
    if champion_version is None:
        return None
    champ = reg.verify(champion_version)
    window = _window(champ.train)
    parquet = find_eval_parquet(ws, eval_day, feature_version)
    scores = _score(reg.local_dir(champion_version, cache_dir(ws)) / "model.pt", parquet)
    return _Champion(champion_version, scores, window, parquet)


class _PastScores:
    """Earlier versions scored on the eval day, each once (the champion already is); why one could
    not be, in ``skipped``."""

    def __init__(self, reg: Registry, ws: Workspace, eval_day: dt.date, champion: _Champion) -> None:
        self.reg, self.ws, self.eval_day, self.parquet = reg, ws, eval_day, champion.eval_parquet
        self.scores: dict[str, pd.DataFrame] = {champion.version: champion.scores}
        self.skipped: dict[str, str] = {}

    def get(self, past: str) -> pd.DataFrame | None:
        """``past`` scored on the eval day; None (and why, in ``skipped``) when it cannot be."""
        if past in self.scores:
            return self.scores[past]
        try:
            window = _window(self.reg.verify(past).train)
            if window is not None and window.covers(self.eval_day):
                self.skipped[past] = f"trained on the eval day {self.eval_day} (window {window})"
                return None
            self.scores[past] = _score(
                self.reg.local_dir(past, cache_dir(self.ws)) / "model.pt", self.parquet
            )
            return self.scores[past]
        except RankerError as exc:
            # an old version that can no longer be read must not stop today's gate
            log.warning("gate: %s left out of the comparison: %s", past, exc)
            self.skipped[past] = str(exc)
            return None

    def of(self, versions: Sequence[str]) -> dict[str, pd.DataFrame]:
        """Those of ``versions`` that could be scored, in their order."""
        return {v: found for v in versions if (found := self.get(v)) is not None}


@dataclass(frozen=True)
class _Compared:
    """The models the candidate is compared with besides the champion, and the earlier days."""

    anchors: dict[str, pd.DataFrame] = field(default_factory=dict)
    references: dict[str, pd.DataFrame] = field(default_factory=dict)
    trend: tuple[str, pd.DataFrame] | None = None
    history: list[PastComparison] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # version -> why it was left out


def _compared_models(
    reg: Registry, ws: Workspace, candidate: str, eval_day: dt.date, champion: _Champion, config: GateConfig
) -> _Compared:
    """The recent champions (anchors, references), the champion served trend_days ago and the
    earlier days' comparisons, as far as the config asks for them."""
    past = _PastScores(reg, ws, eval_day, champion)
    wanted = max(config.anchor_champions, config.reference_champions)
    recent = [v for v in recent_champions(reg.history(), wanted) if v != candidate] if wanted else []
    anchors = past.of(recent[: config.anchor_champions])
    before = [v for v in recent if v != champion.version][: max(0, config.reference_champions - 1)]
    references = past.of(before)
    served = trend_champion(reg, eval_day, config.trend_days) if config.trend_days > 0 else None
    trend = None
    if served is not None and served not in (champion.version, candidate):
        found = past.get(served)
        trend = (served, found) if found is not None else None
    history = past_comparisons(reg, eval_day, config.pool_days - 1) if config.pool_days > 1 else []
    return _Compared(anchors, references, trend, history, past.skipped)


def _report_body(
    report: GateReport, candidate: str, champion_version: str | None, skipped: dict[str, str]
) -> GateReportBody:
    """The report with the versions named and the versions left out (under the anchor)."""
    body = report.to_dict()
    body["candidate"] = {"version": candidate, **body["candidate"]}
    if body["champion"] is not None:
        body["champion"] = {"version": champion_version, **body["champion"]}
    if body["anchor"] is not None and skipped:
        body["anchor"]["left_out"] = skipped
    return body


_LINEAGE_DEPTH = 20  # warm starts followed back at most this far (a base is trained from scratch)


@dataclass(frozen=True)
class _Lineage:
    known: bool  # every warm start could be followed back to a model trained from scratch
    clean: bool  # and none of them trained on the eval day or later
    why: str | None = None


def _parent(train: TrainRecord) -> str | _Lineage:
    """The registry version a model was warm-started from (or continues), or the lineage's end:
    trained from scratch (clean) or from a file that cannot be followed (unknown)."""
    source = str((train.get("warm_start") or {}).get("source") or "none")
    parent = (train.get("lineage") or {}).get("parent")
    words = source.split()
    if parent:
        return str(parent)
    if source == "none" or "(none yet" in source:
        return _Lineage(True, True)
    if len(words) == 2 and words[0] in ("champion", "base"):
        return words[1]
    return _Lineage(False, False, f"warm-started from {source!r}, not a registry version")


def _lineage(reg: Registry, train: TrainRecord, eval_day: dt.date) -> _Lineage:
    """Whether the models a candidate was warm-started from (and theirs, back to one trained from
    scratch) all trained on days before the eval day. A warm start from a file (not a registry
    version) cannot be followed: unknown."""
    seen: set[str] = set()
    for _ in range(_LINEAGE_DEPTH):
        version = _parent(train)
        if isinstance(version, _Lineage):
            return version
        if version in seen:
            return _Lineage(True, True)
        seen.add(version)
        try:
            train = reg.record(version).train
        except RankerError as exc:
            return _Lineage(False, False, f"its warm start {version} cannot be read ({exc})")
        window = _window(train)
        if window is None:
            return _Lineage(False, False, f"its warm start {version} does not record its training window")
        if window.end > eval_day:
            return _Lineage(True, False, f"its warm start {version} trained on {window}, up to the eval day")
    return _Lineage(False, False, f"a warm-start chain longer than {_LINEAGE_DEPTH} models")


def leak_evidence(
    reg: Registry, cand: VersionRecord, champion: str | None, eval_day: dt.date
) -> LeakEvidence:
    """The candidate's data-level leak checks (its window's data validation, recorded with it),
    its lineage, and whether it is the first of a review's recipe switch (its recipe came from a
    review the champion's did not)."""
    from ranking.core.summaries import DataValidation

    recorded = cand.train.get("data_validation")
    validation = DataValidation.model_validate(recorded) if isinstance(recorded, dict) else None
    lineage = _lineage(reg, cand.train, eval_day)
    switched = cand.train.get("recipe_source")
    if switched and champion is not None:
        try:
            if reg.record(champion).train.get("recipe_source") == switched:
                switched = None
        except RankerError:
            pass
    return LeakEvidence(
        data_checked=validation is not None and validation.leak_checked,
        data_clean=validation is not None and validation.leak_clean,
        lineage_checked=lineage.known,
        lineage_clean=lineage.clean,
        review_switch=str(switched) if switched else None,
        detail=lineage.why
        or (f"data validation {validation.verdict}: {validation.report}" if validation else ""),
    )


@dataclass(frozen=True)
class EvalExtras:
    """What the gate reads from the eval day's partition beside the models' scores."""

    heuristic: Heuristic | None = None
    slices: pd.DataFrame | None = None


def eval_extras(parquet: Path, heuristic: HeuristicConfig | None, slices: SliceConfig | None) -> EvalExtras:
    """The heuristic's scores and the slices on the eval partition ``parquet`` (None each when not
    asked for, or when the partition lacks its columns or cannot be read: said in the log)."""
    if heuristic is None and slices is None:
        return EvalExtras()
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = {
        "heuristic": list(HEURISTIC_COLUMNS) if heuristic else [],
        "slices": list(slices.columns_needed) if slices else [],
    }
    try:
        present = set(pq.read_schema(parquet).names)
        usable = {what: cols for what, cols in wanted.items() if set(cols) <= present}
        for what in sorted(wanted.keys() - usable.keys()):
            log.warning("gate: %s lacks the columns of the %s: not scored", parquet, what)
        columns = ["request_id", "pin_id", "saved", *sorted({c for cols in usable.values() for c in cols})]
        examples = pq.read_table(parquet, columns=columns).to_pandas()
    except (OSError, pa.ArrowException) as exc:  # the models' scoring says what is wrong with it
        log.warning("gate: could not read %s (%s): neither the heuristic nor the slices scored", parquet, exc)
        return EvalExtras()
    return EvalExtras(
        heuristic=(
            Heuristic(
                heuristic.name, heuristic_scores(examples, heuristic), heuristic.margin, heuristic.policy
            )
            if heuristic and "heuristic" in usable
            else None
        ),
        slices=slice_frame(examples, slices) if slices and "slices" in usable else None,
    )


def _eval_extras(
    ws: Workspace,
    eval_day: dt.date,
    feature_version: Any,
    heuristic: HeuristicConfig | None,
    slices: SliceConfig | None,
) -> EvalExtras:
    """:func:`eval_extras` on the eval day's built partition (nothing when none is built: a
    candidate judged on its recorded scores needs no window)."""
    if heuristic is None and slices is None:
        return EvalExtras()
    try:
        parquet = find_eval_parquet(ws, eval_day, feature_version)
    except RankerError as exc:
        log.warning("gate: neither the heuristic nor the slices are scored: %s", exc)
        return EvalExtras()
    return eval_extras(parquet, heuristic, slices)


def gate_candidate(req: GateRequest) -> GateResult:
    """Run the gate for one candidate and record its verdict (the latest gate run wins)."""
    started = time.perf_counter()
    reg = Registry.for_workspace(req.ws, req.registry)
    version = req.candidate
    cand = reg.verify(version)
    cand_window = _window(cand.train)
    own_eval_day = cand_window.end if cand_window else None
    eval_day = req.end or own_eval_day
    if eval_day is None:
        raise RankerError(f"cannot tell {version}'s eval day from its training manifest: pass --end DATE")
    feature_version = cand.train.get("feature_version")
    cand_scores = _candidate_scores(reg, req.ws, version, eval_day, own_eval_day, feature_version)
    champion = _champion(reg, req.ws, version, eval_day, feature_version)
    compared = (
        _compared_models(reg, req.ws, version, eval_day, champion, req.config) if champion else _Compared()
    )
    extras = _eval_extras(req.ws, eval_day, feature_version, req.heuristic, req.slices)
    report = run_gate(
        cand_scores,
        champion.scores if champion else None,
        req.config,
        eval_date=eval_day,
        candidate_window=cand_window,
        champion_window=champion.window if champion else None,
        anchors=compared.anchors,
        references=compared.references,
        trend_reference=compared.trend,
        history=compared.history,
        leak_evidence=leak_evidence(reg, cand, champion.version if champion else None, eval_day),
        heuristic=extras.heuristic,
        slices=extras.slices,
    )
    champion_version = champion.version if champion else None
    body = _report_body(report, version, champion_version, compared.skipped)
    verdict = Verdict.model_validate(
        {
            **body,
            "version": version,
            "champion_version": champion_version,
            "when": utc_now(),
            "run_id": req.run_id,
            "who": current_actor(),
        }
    )
    reg.record_verdict(version, verdict)
    summary = GateSummary.model_validate(
        {**body, "duration_seconds": round(time.perf_counter() - started, 3)}
    )
    return GateResult(summary=summary, passed=report.passed)
