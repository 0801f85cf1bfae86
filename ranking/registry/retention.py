"""What `ranker gc` prunes by age (``[retention]``): the files a finished retrain no longer needs.

Every daily run kept its two epoch checkpoints (96 MB a run on a 1,000-request-a-day workspace;
gigabytes at production table sizes), and run folders, window partitions and backtest replays
stayed forever (issue 32: 771 MB of ``runs/`` after 10 runs, 3.0 GB after one 14-day review), so
the disk filled by design. Expired, each is a :class:`~ranking.registry.janitor.Leftover` that the
janitor removes under its usual rule (never what a live process holds, never within the grace
period):

- ``expired-checkpoints``: ``runs/<id>/checkpoints/`` of a run whose export finished
  (``model.pt`` and its sidecar), ``checkpoint_days`` after it was last written. Only an
  unfinished run resumes from them; the registry keeps the model.
- ``expired-run``: a whole run folder ``run_days`` after it was last written, once the registry
  holds its model (``registered.json`` names a complete version of this run id).
- ``expired-backtest``: a backtest's or review's replay folder (``backtests/<name>/``)
  ``backtest_days`` after anything in it was written (a re-run replays what it lacks).
- ``expired-window-day``: window partitions and manifests of days more than ``window_days``
  before the newest source day (``ranking.config.requests.retention_policy``: what the window,
  its base and the review read, plus ``[retention] window_extra_days``; a window that needs them
  again rebuilds them).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.core.errors import RankerError, RegistryError
from ranking.registry.leftovers import Leftover, lock_held, tree_stats

if TYPE_CHECKING:
    from ranking.registry.registry import Registry

REGISTERED_FILE = "registered.json"  # in a run folder: the version the registry made of it
EXPIRED_CHECKPOINTS, EXPIRED_RUN = "expired-checkpoints", "expired-run"
EXPIRED_BACKTEST, EXPIRED_WINDOW_DAY = "expired-backtest", "expired-window-day"
_DAY = 86400.0
_DATE = re.compile(r"\A(\d{4}-\d{2}-\d{2})(?:_\d+d)?\Z", re.ASCII)
_SOURCE_DAY = re.compile(r"\Adate=(\d{4}-\d{2}-\d{2})\Z", re.ASCII)


@dataclass(frozen=True)
class RetentionPolicy:
    """Ages in days after which each kind expires (None: kept forever)."""

    checkpoint_days: float | None = 1.0
    run_days: float | None = 30.0
    backtest_days: float | None = 14.0
    window_days: int | None = 90

    def __post_init__(self) -> None:
        for name in ("checkpoint_days", "run_days", "backtest_days", "window_days"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise RankerError(f"retention {name} must be >= 0 (or unset: kept forever), got {value}")


def _expired(modified: float, days: float | None, now: float) -> bool:
    return days is not None and now - modified > days * _DAY


def _day(name: str) -> dt.date | None:
    match = _DATE.match(name)
    if match is None:
        return None
    try:
        return dt.date.fromisoformat(match[1])
    except ValueError:
        return None


def newest_source_day(root: Path) -> dt.date | None:
    """The newest ``source/impressions/date=YYYY-MM-DD`` day (None: no source data)."""
    folder = root / "source" / "impressions"
    days = []
    if folder.is_dir():
        for entry in folder.iterdir():
            match = _SOURCE_DAY.match(entry.name)
            if match:
                try:
                    days.append(dt.date.fromisoformat(match[1]))
                except ValueError:
                    continue
    return max(days, default=None)


def _registered(run: Path, reg: Registry | None) -> bool:
    """Whether the registry holds this run folder's model: a complete version of this run id."""
    from ranking.core.atomic import read_json

    if reg is None or not (run / REGISTERED_FILE).is_file():
        return False
    try:
        version = read_json(run / REGISTERED_FILE).get("version")
        return bool(version) and reg.is_complete(str(version)) and reg.record(str(version)).run_id == run.name
    except (OSError, ValueError, AttributeError, RegistryError):
        return False


def retention_leftovers(
    root: Path, reg: Registry | None, policy: RetentionPolicy, now: float
) -> list[Leftover]:
    """What ``policy`` lets go under the workspace ``root`` at ``now`` (epoch seconds)."""
    backtests = _expired_backtests(root, policy, now)
    gone = {Path(b.where) for b in backtests}
    # a backtest's and a review's replays keep a run folder per replayed day (in each recipe's
    # home, and the gate suite's candidates): their checkpoints go as a daily run's do, long
    # before the whole replay; their folders only with it (no registry of ours holds them)
    replayed = [
        leftover
        for runs in sorted(
            [*root.glob("backtests/*/*/home/runs"), *root.glob("backtests/*/*/suite/candidates")]
        )
        if runs.parents[2] not in gone
        for leftover in _expired_runs(runs, None, policy, now)
    ]
    return [
        *_expired_runs(root / "runs", reg, policy, now),
        *replayed,
        *backtests,
        *_expired_windows(root, policy),
    ]


def _leftover(kind: str, path: Path, held: bool = False) -> Leftover | None:
    try:
        modified, size = tree_stats(path)
    except FileNotFoundError:  # removed meanwhile
        return None
    return Leftover(kind, str(path), modified, size, held)


def _expired_runs(runs: Path, reg: Registry | None, policy: RetentionPolicy, now: float) -> list[Leftover]:
    """In the folder of run folders ``runs``: run folders the registry ``reg`` holds, past
    ``run_days``; else a finished run's checkpoints, past ``checkpoint_days``. A folder a training
    job holds (its lock) is held."""
    found: list[Leftover] = []
    for run in (
        sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()) if runs.is_dir() else []
    ):
        held = lock_held(runs / f".{run.name}.train.lock")
        whole = _leftover(EXPIRED_RUN, run, held)
        if whole is not None and _expired(whole.modified, policy.run_days, now) and _registered(run, reg):
            found.append(whole)
        elif (run / "model.pt.sha256").is_file() and (run / "checkpoints").is_dir():
            part = _leftover(EXPIRED_CHECKPOINTS, run / "checkpoints", held)
            if part is not None and _expired(part.modified, policy.checkpoint_days, now):
                found.append(part)
    return found


def _expired_backtests(root: Path, policy: RetentionPolicy, now: float) -> list[Leftover]:
    folder, found = root / "backtests", []
    for entry in (
        sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()) if folder.is_dir() else []
    ):
        leftover = _leftover(EXPIRED_BACKTEST, entry)
        if leftover is not None and _expired(leftover.modified, policy.backtest_days, now):
            found.append(leftover)
    return found


def _expired_windows(root: Path, policy: RetentionPolicy) -> list[Leftover]:
    """Window manifests and partitions of days before the newest source day - ``window_days``."""
    newest = newest_source_day(root)
    if policy.window_days is None or newest is None:
        return []
    cutoff = newest - dt.timedelta(days=policy.window_days)
    found = []
    for folder in (root / "windows", root / "windows" / "days"):
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            day = _day(entry.name)
            if day is not None and day < cutoff and entry.is_dir() and not entry.is_symlink():
                leftover = _leftover(EXPIRED_WINDOW_DAY, entry)
                if leftover is not None:
                    found.append(leftover)
    return found
