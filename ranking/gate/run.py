"""The gate's I/O edge (`ranker gate`): find the eval day, score the candidate, the champion and
the anchors (the last N champions of the registry's history) there, run the pure checks
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
from ranking.core.workspace import Workspace
from ranking.gate.checks import GateConfig, TrainingWindow, run_gate
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
    from ranking.trainer.scoring import score_checkpoint

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
    if champ_scores is not None and req.config.anchor_champions > 0:
        for past in recent_champions(reg.history(), req.config.anchor_champions):
            if past == champion_version:
                anchors[past] = champ_scores
                continue
            if past == version:
                continue
            try:
                window = _window(reg.verify(past).train)
                if window is not None and window.covers(eval_day):
                    skipped[past] = f"trained on the eval day {eval_day} (window {window})"
                    continue
                anchors[past] = _score(reg.local_dir(past, cache_dir(ws)) / "model.pt", parquet)
            except RankerError as exc:
                # an old version that can no longer be read must not stop today's gate
                log.warning("gate: anchor candidate %s left out: %s", past, exc)
                skipped[past] = str(exc)

    report = run_gate(
        cand_scores,
        champ_scores,
        req.config,
        eval_date=eval_day,
        candidate_window=cand_window,
        champion_window=champ_window,
        anchors=anchors,
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
    summary = {**body, "duration_seconds": round(time.perf_counter() - started, 3)}
    return GateResult(summary=summary, passed=report.passed)
