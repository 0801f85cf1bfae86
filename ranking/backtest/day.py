"""One replayed day's record (``<recipe>/days/<date>.json``, written by ``replay.replay_day``) and
what it is read from: the recipe registry's champion and versions, the day's recorded step
summaries, the window's manifest, the candidate's registered metrics and eval scores; whether the
candidate beat the served model; and the fingerprint chained over the previous day's (recipe
config, day, code version, the window's content id) that says whether a recorded day may be reused.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ranking.backtest.spec import BacktestError, RecipeRun
from ranking.core.atomic import atomic_path, read_json
from ranking.core.errors import RankerError
from ranking.core.summaries import StepSummary
from ranking.core.workspace import Workspace


def day_fingerprint(previous: str | None, day: dt.date, config: str, code: str, window: str | None) -> str:
    """The day's fingerprint, chained over the previous day's: a recorded day is reused only while it
    and every day before it match."""
    body = json.dumps([previous, day.isoformat(), config, code, window])
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def champion_of(home: Path) -> tuple[str | None, dict[str, Any]]:
    """The recipe registry's champion and its train record (None, {}: no champion yet)."""
    from ranking.registry import Registry

    reg = Registry(str(home / "registry"))
    version = reg.champion()
    return version, (reg.record(version).train if version else {})


def version_count(home: Path) -> int:
    """The versions in the recipe's registry."""
    from ranking.registry import Registry

    return len(Registry(str(home / "registry")).version_ids())


def step_summary(home: Path, run_id: str, step: str) -> StepSummary | None:
    """The day's recorded ``step`` summary through its model (None: the step did not record one,
    e.g. the run stopped before it); one that does not fit its model stops the backtest."""
    from pydantic import ValidationError

    from ranking.core.summaries import not_a_summary, parse_summary

    path = home / "pipeline" / run_id / f"{step}.json"
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    try:
        return parse_summary(data, step)
    except ValidationError as exc:
        raise BacktestError(not_a_summary(path, step, exc)) from None


def window_manifest(shared_home: Path, day: dt.date, days: int) -> dict[str, Any] | None:
    """The manifest of the ``days``-day window ending at ``day`` (None: not built)."""
    path = shared_home / "windows" / f"{day.isoformat()}_{days}d" / "manifest.json"
    try:
        found: dict[str, Any] = read_json(path)
        return found
    except (OSError, ValueError):
        return None


def version_metrics(home: Path, version: str | None) -> dict[str, Any] | None:
    """A registered version's offline metrics (its eval.json; None: no version, or unreadable)."""
    if not version:
        return None
    from ranking.registry import Registry

    try:
        found: dict[str, Any] = json.loads(Registry(str(home / "registry")).read_file(version, "eval.json"))
        return found
    except (RankerError, ValueError):
        return None


def copy_candidate_scores(run: RecipeRun, day: dt.date, version: str | None) -> str | None:
    """The candidate's eval scores beside the served model's (for the paired candidate comparison)."""
    if not version:
        return None
    from ranking.registry import Registry

    try:
        data = Registry(str(run.home / "registry")).read_file(version, "eval_scores.parquet")
    except RankerError:
        return None
    path = run.candidate_scores_path(day)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return str(path.relative_to(run.folder))


def beat_served(candidate: Mapping[str, Any] | None, served: Mapping[str, Any] | None) -> bool | None:
    """Candidate save HIT@3 above the served model's on the same eval day (None: no comparison)."""
    cand = (candidate or {}).get("save_hit_at_3")
    base = ((served or {}).get("metrics") or {}).get("save_hit_at_3")
    if not isinstance(cand, int | float) or not isinstance(base, int | float):
        return None
    return bool(cand > base)


def checkpoint_path(run: RecipeRun, version: str) -> Path:
    """A version's model checkpoint in the recipe's registry cache."""
    from ranking.registry import Registry, cache_dir

    reg = Registry(str(run.home / "registry"))
    return reg.local_dir(version, cache_dir(Workspace.resolve(run.home))) / "model.pt"
