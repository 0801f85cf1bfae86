"""The gate's I/O edge (`ranker gate`): find the eval day, score the candidate, the champion and
the recent champions (anchors, references, the champion served trend_days ago) there, with
the earlier days' comparisons from their verdicts, run the pure checks
(ranking/gate/checks.py) and record the verdict in the registry."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.core.errors import RankerError, RegistryError
from ranking.core.summaries import GateSummary
from ranking.core.workspace import Workspace
from ranking.gate.checks import GateConfig, PastComparison, TrainingWindow, run_gate
from ranking.registry import Registry, cache_dir, current_actor
from ranking.registry.records import utc_now

if TYPE_CHECKING:
    import pandas as pd

    from ranking.registry.records import AliasEvent

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


@dataclass(frozen=True)
class GateResult:
    summary: dict[str, Any]  # the `gate` step summary (the report, versions, duration)
    passed: bool


def _window(train: dict[str, Any]) -> TrainingWindow | None:
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
            verdict = reg.verdict(version) or {}
        except RankerError:
            continue
        day, change, ci = verdict.get("eval_date"), verdict.get("relative_change"), verdict.get("ci")
        if not isinstance(day, str) or day >= eval_day.isoformat() or day in by_day:
            continue
        if not isinstance(change, int | float) or not (isinstance(ci, list) and len(ci) == 2):
            continue
        by_day[day] = PastComparison(dt.date.fromisoformat(day), float(change), (float(ci[0]), float(ci[1])))
        if len(by_day) == n:
            break
    return [by_day[d] for d in sorted(by_day)]


def find_eval_parquet(ws: Workspace, day: dt.date, feature_version: str | None = None) -> Path:
    """The eval-day partition of a built window whose eval day is ``day``."""
    found: list[tuple[bool, Path]] = []
    for manifest_path in sorted(ws.windows.glob("*/manifest.json")):
        try:
            manifest = json.loads(manifest_path.read_text())
            ev = manifest["eval"]
            if ev["date"] != day.isoformat():
                continue
            path = Path(ev["path"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if path.is_file():
            found.append((manifest.get("feature_version") == feature_version, path))
    if not found:
        raise RankerError(
            f"no built window has eval day {day} under {ws.windows}: run `ranker features window --end {day}`"
        )
    found.sort(key=lambda t: not t[0])  # same feature definitions first
    return found[0][1]


def _score(checkpoint: Path, eval_parquet: Path) -> pd.DataFrame:
    from ranking.trainer.evaluation.scoring import score_checkpoint

    return score_checkpoint(checkpoint, eval_parquet)


def gate_candidate(req: GateRequest) -> GateResult:
    """Run the gate for one candidate and record its verdict (the latest gate run wins)."""
    import pandas as pd

    started = time.perf_counter()
    ws = req.ws
    reg = Registry.for_workspace(ws, req.registry)
    version = req.candidate
    cand = reg.verify(version)
    cand_window = _window(cand.train)
    own_eval_day = cand_window.end if cand_window else None
    eval_day = req.end or own_eval_day
    if eval_day is None:
        raise RankerError(f"cannot tell {version}'s eval day from its training manifest: pass --end DATE")

    feature_version = cand.train.get("feature_version")
    if eval_day == own_eval_day:
        cand_scores = pd.read_parquet(io.BytesIO(reg.read_file(version, "eval_scores.parquet")))
    else:
        parquet = find_eval_parquet(ws, eval_day, feature_version)
        cand_scores = _score(reg.local_dir(version, cache_dir(ws)) / "model.pt", parquet)

    champion_version = reg.champion()
    if champion_version == version:
        raise RegistryError(f"{version} already is the champion: nothing to gate")
    champ_scores = None
    champ_window = None
    if champion_version is not None:
        champ = reg.verify(champion_version)
        champ_window = _window(champ.train)
        parquet = find_eval_parquet(ws, eval_day, feature_version)
        champ_scores = _score(reg.local_dir(champion_version, cache_dir(ws)) / "model.pt", parquet)

    anchors: dict[str, pd.DataFrame] = {}
    skipped: dict[str, str] = {}
    references: dict[str, pd.DataFrame] = {}
    trend: tuple[str, pd.DataFrame] | None = None
    history: list[PastComparison] = []
    if champ_scores is not None:
        config = req.config
        past_scores: dict[str, pd.DataFrame] = {champion_version: champ_scores}  # type: ignore[dict-item]

        def scores_of(past: str) -> pd.DataFrame | None:
            """``past`` scored on the eval day; None (and why, in ``skipped``) when it cannot be."""
            if past in past_scores:
                return past_scores[past]
            try:
                window = _window(reg.verify(past).train)
                if window is not None and window.covers(eval_day):
                    skipped[past] = f"trained on the eval day {eval_day} (window {window})"
                    return None
                past_scores[past] = _score(reg.local_dir(past, cache_dir(ws)) / "model.pt", parquet)
                return past_scores[past]
            except RankerError as exc:
                # an old version that can no longer be read must not stop today's gate
                log.warning("gate: %s left out of the comparison: %s", past, exc)
                skipped[past] = str(exc)
                return None

        wanted = max(config.anchor_champions, config.reference_champions)
        recent = [v for v in recent_champions(reg.history(), wanted) if v != version] if wanted else []
        for past in recent[: config.anchor_champions]:
            found = scores_of(past)
            if found is not None:
                anchors[past] = found
        for past in [v for v in recent if v != champion_version][: max(0, config.reference_champions - 1)]:
            found = scores_of(past)
            if found is not None:
                references[past] = found
        served = trend_champion(reg, eval_day, config.trend_days) if config.trend_days > 0 else None
        if served is not None and served not in (champion_version, version):
            found = scores_of(served)
            if found is not None:
                trend = (served, found)
        if config.pool_days > 1:
            history = past_comparisons(reg, eval_day, config.pool_days - 1)

    report = run_gate(
        cand_scores,
        champ_scores,
        req.config,
        eval_date=eval_day,
        candidate_window=cand_window,
        champion_window=champ_window,
        anchors=anchors,
        references=references,
        trend_reference=trend,
        history=history,
    )
    body = report.to_dict()
    body["candidate"] = {"version": version, **body["candidate"]}
    if body["champion"] is not None:
        body["champion"] = {"version": champion_version, **body["champion"]}
    if body["anchor"] is not None and skipped:
        body["anchor"]["left_out"] = skipped
    verdict = {
        **body,
        "version": version,
        "champion_version": champion_version,
        "when": utc_now(),
        "run_id": req.run_id,
        "who": current_actor(),
    }
    reg.record_verdict(version, verdict)
    summary = GateSummary.model_validate(
        {**body, "duration_seconds": round(time.perf_counter() - started, 3)}
    )
    return GateResult(summary=summary.body(), passed=report.passed)
