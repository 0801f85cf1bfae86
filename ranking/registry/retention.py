"""What `ranker gc` prunes (``[retention]``): the files a finished retrain no longer needs.

Every daily run kept its two epoch checkpoints (96 MB a run on a 1,000-request-a-day workspace;
gigabytes at production table sizes), and run folders, window partitions and backtest replays
stayed forever (issue 32: 771 MB of ``runs/`` after 10 runs, 3.0 GB after one 14-day review), so
the disk filled by design. Expired, each is a :class:`~ranking.registry.janitor.Leftover` that the
janitor removes under its usual rule (never what a live process holds, never within the grace
period):

- ``expired-checkpoints``: ``runs/<id>/checkpoints/`` of a run the registry holds
  (``registered.json``), ``checkpoint_days`` after it was last written. Only ``--resume`` reads
  epoch checkpoints, and it continues a run that did not register: one that never exported keeps
  them, one that exported but did not register (a re-run continues after its last epoch, exports
  and registers) keeps them ``run_days``. Rollbacks and warm starts read the registry's copy.
- ``expired-run``: a whole run folder ``run_days`` after it was last written, once the registry
  holds its model (``registered.json`` names a complete version of this run id), unless its role
  keeps it (:func:`protected_runs`: the champion, the versions repeated rollbacks would reach, the
  base, what those were warm-started from, the newest ``keep_runs`` versions, a configured warm
  start path): kept for the people who judge a rollback (its ``report.md``, curves, logs).
- ``expired-backtest``: a backtest's or review's replay (``backtests/<name>/``) ``backtest_days``
  after anything in it was written (a re-run replays what it lacks), all but its reports
  (:data:`KEPT_REPORTS`; a review's report lies outside, in ``reviews/<end>/``).
- ``expired-window-day``: window partitions and manifests of days more than ``window_days``
  before the newest source day (``ranking.config.requests.retention_policy``: what the window,
  its base and the review read, plus ``[retention] window_extra_days``; a window that needs them
  again rebuilds them).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.core.errors import RankerError, RegistryError
from ranking.registry.leftovers import Leftover, LeftoverRow, leftover_row, lock_held, tree_stats

if TYPE_CHECKING:
    from ranking.registry.records import TrainRecord
    from ranking.registry.registry import Registry

REGISTERED_FILE = "registered.json"  # in a run folder: the version the registry made of it
EXPIRED_CHECKPOINTS, EXPIRED_RUN = "expired-checkpoints", "expired-run"
EXPIRED_BACKTEST, EXPIRED_WINDOW_DAY = "expired-backtest", "expired-window-day"
_DAY = 86400.0
_DATE = re.compile(r"\A(\d{4}-\d{2}-\d{2})(?:_\d+d)?\Z", re.ASCII)
_SOURCE_DAY = re.compile(r"\Adate=(\d{4}-\d{2}-\d{2})\Z", re.ASCII)
# what a pruned replay keeps: the backtest's report, what it was asked, each gate suite's report
KEPT_REPORTS = ("report", "spec.json", "*/suite/report")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionPolicy:
    """Ages in days after which each kind expires (None: kept forever), and what is kept by role."""

    checkpoint_days: float | None = 1.0
    run_days: float | None = 30.0
    backtest_days: float | None = 14.0
    window_days: int | None = 90
    keep_runs: int = 7  # the newest registered versions whose run folders stay whatever their age
    keep_rollbacks: int = 3  # rollbacks in a row (of the champion, of the base) whose targets stay
    keep_paths: tuple[str, ...] = ()  # warm starts the config names by path

    def __post_init__(self) -> None:
        for name in ("checkpoint_days", "run_days", "backtest_days", "window_days"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise RankerError(f"retention {name} must be >= 0 (or unset: kept forever), got {value}")
        for name in ("keep_runs", "keep_rollbacks"):
            if getattr(self, name) < 0:
                raise RankerError(f"retention {name} must be >= 0, got {getattr(self, name)}")


@dataclass
class RetentionPlan:
    """What the policy lets go, and the expired run folders their role keeps (rows with ``why``)."""

    leftovers: list[Leftover] = field(default_factory=list)
    protected: list[LeftoverRow] = field(default_factory=list)


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


# ---------------------------------------------------------------- what a role keeps


def _started_from(train: TrainRecord) -> tuple[str | None, str | None]:
    """(registry version, file path) a model was warm-started from or continues, as the gate's
    lineage check reads it (``lineage.parent``, else a ``champion vN`` / ``base vN`` source)."""
    warm, lineage = train.get("warm_start") or {}, train.get("lineage") or {}
    if not isinstance(warm, dict):
        warm = {}
    if not isinstance(lineage, dict):
        lineage = {}
    if lineage.get("parent"):
        return str(lineage["parent"]), None
    words = str(warm.get("source") or "none").split()
    if len(words) == 2 and words[0] in ("champion", "base"):
        return words[1], None
    if words == ["path"] and warm.get("path"):
        return None, str(warm["path"])
    return None, None


def protected_versions(reg: Registry, policy: RetentionPolicy) -> dict[str, str]:
    """{version: why its run folder stays}: the champion and the base, the versions ``ranker
    rollback`` run ``keep_rollbacks`` times in a row would reach from each (rollback_target on the
    history with each rollback appended), and the newest ``keep_runs`` complete versions."""
    from ranking.registry.aliases import BASE, CHAMPION, rollback_target

    why: dict[str, str] = {}
    for alias in (CHAMPION, BASE):
        walked = reg.history(alias)
        if not walked:
            continue
        why.setdefault(walked[-1].to_version, f"the {alias}")
        for step in range(1, policy.keep_rollbacks + 1):
            try:
                target = rollback_target(walked, alias)
            except RegistryError:  # nothing further back
                break
            why.setdefault(target, f"the {alias}'s rollback {step}")
            head = walked[-1]
            walked = [
                *walked,
                replace(
                    head, seq=head.seq + 1, from_version=head.to_version, to_version=target, action="rollback"
                ),
            ]
    newest = 0
    for version in reversed(reg.version_ids()):
        if newest >= policy.keep_runs:
            break
        if reg.is_complete(version):
            newest += 1
            why.setdefault(version, f"one of the newest {policy.keep_runs} versions")
    return why


def _run_name(runs: Path, path: str) -> str | None:
    """The run folder under ``runs`` that ``path`` (a folder or a file in one) lies in."""
    try:
        parts = Path(path).expanduser().resolve().relative_to(runs.resolve()).parts
    except (ValueError, OSError):
        return None
    return parts[0] if parts else None


def protected_runs(runs: Path, reg: Registry, policy: RetentionPolicy) -> dict[str, str]:
    """{run folder name under ``runs``: why it stays}: the folders of :func:`protected_versions`
    and of the model each of them was warm-started from or continues (one step: a warm start reads
    only its source's ``model.pt``, and the gate follows the chain in the registry's records), and
    the folders of warm starts the config names by path."""
    roles = protected_versions(reg, policy)
    sources: dict[str, str] = {}
    out: dict[str, str] = {}

    def name(version: str, why: str) -> tuple[str | None, str | None]:
        rec = reg.record(version)
        for found in (
            rec.run_id,
            _run_name(runs, rec.source_run_dir) if rec.source_run_dir else None,
        ):
            if found:
                out.setdefault(found, f"{why} ({version})")
        return _started_from(rec.train)

    for version, why in roles.items():
        source, path = name(version, why)
        if source is not None and source not in roles:
            sources.setdefault(source, f"what {version} was warm-started from")
        if path is not None and (found := _run_name(runs, path)):
            out.setdefault(found, f"what {version} was warm-started from ({path})")
    for version, why in sources.items():
        name(version, why)
    for path in policy.keep_paths:
        if found := _run_name(runs, path):
            out.setdefault(found, f"the config's warm start {path}")
    return out


# ---------------------------------------------------------------- what expires


def retention_plan(root: Path, reg: Registry | None, policy: RetentionPolicy, now: float) -> RetentionPlan:
    """What ``policy`` lets go under the workspace ``root`` at ``now`` (epoch seconds), and the
    expired run folders kept by their role."""
    plan = RetentionPlan()
    keep: dict[str, str] | None = {}
    if reg is None:
        keep = None
    else:
        try:
            keep = protected_runs(root / "runs", reg, policy)
        except RegistryError as exc:  # a damaged history: what a rollback needs is unknown
            log.warning("retention: no run folder is pruned: %s", exc)
            keep = None
    plan.leftovers, plan.protected = _expired_runs(root / "runs", reg, policy, now, keep)
    backtests, expired = _expired_backtests(root, policy, now)
    # a backtest's and a review's replays keep a run folder per replayed day (in each recipe's
    # home, with its own registry, and the gate suite's candidates, which no registry holds):
    # their checkpoints go as a daily run's do, long before the replay; their folders only with it
    from ranking.registry.registry import Registry

    for runs in sorted(root.glob("backtests/*/*/home/runs")):
        if runs.parents[2] not in expired:
            own = runs.parent / "registry"
            found, _ = _expired_runs(runs, Registry(str(own)) if own.is_dir() else None, policy, now, None)
            plan.leftovers += found
    for runs in sorted(root.glob("backtests/*/*/suite/candidates")):
        if runs.parents[2] not in expired:
            plan.leftovers += _expired_runs(runs, None, policy, now, None)[0]
    plan.leftovers += [*backtests, *_expired_windows(root, policy)]
    return plan


def retention_leftovers(
    root: Path, reg: Registry | None, policy: RetentionPolicy, now: float
) -> list[Leftover]:
    """What ``policy`` lets go under the workspace ``root`` at ``now`` (epoch seconds)."""
    return retention_plan(root, reg, policy, now).leftovers


def _leftover(kind: str, path: Path, held: bool = False) -> Leftover | None:
    try:
        modified, size = tree_stats(path)
    except FileNotFoundError:  # removed meanwhile
        return None
    return Leftover(kind, str(path), modified, size, held)


def _expired_runs(
    runs: Path, reg: Registry | None, policy: RetentionPolicy, now: float, keep: Mapping[str, str] | None
) -> tuple[list[Leftover], list[LeftoverRow]]:
    """In the folder of run folders ``runs``: (what goes, expired folders kept by their role).

    A run folder the registry ``reg`` holds goes after ``run_days`` unless ``keep`` names it
    (``keep`` None: no folder goes here). Its checkpoints go after ``checkpoint_days``; those of
    a run that exported but is not registered after ``run_days`` (with ``reg`` None nothing
    registers these runs: a finished export is the end). A folder a training job holds (its lock)
    is held."""
    found: list[Leftover] = []
    kept: list[LeftoverRow] = []
    for run in (
        sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()) if runs.is_dir() else []
    ):
        held = lock_held(runs / f".{run.name}.train.lock")
        registered = _registered(run, reg)
        if registered and keep is not None:
            whole = _leftover(EXPIRED_RUN, run, held)
            if whole is not None and _expired(whole.modified, policy.run_days, now):
                if run.name not in keep:
                    found.append(whole)
                    continue
                kept.append(leftover_row(whole, f"kept by [retention]: {keep[run.name]}"))
        if not (run / "model.pt.sha256").is_file() or not (run / "checkpoints").is_dir():
            continue  # never exported: --resume continues from its checkpoints
        days = policy.checkpoint_days if registered or reg is None else policy.run_days
        part = _leftover(EXPIRED_CHECKPOINTS, run / "checkpoints", held)
        if part is not None and _expired(part.modified, days, now):
            found.append(part)
    return found, kept


def _around(folder: Path, kept: set[Path]) -> list[Path]:
    """The largest files and folders under ``folder`` that hold none of ``kept``."""
    out: list[Path] = []
    for child in sorted(folder.iterdir()):
        if child in kept:
            continue
        if child.is_dir() and not child.is_symlink() and any(k.is_relative_to(child) for k in kept):
            out += _around(child, kept)
        else:
            out.append(child)
    return out


def _expired_backtests(root: Path, policy: RetentionPolicy, now: float) -> tuple[list[Leftover], set[Path]]:
    """(what goes, the expired replay folders): an expired replay goes whole, or all but its
    reports (:data:`KEPT_REPORTS`) when it has some."""
    folder, found, expired = root / "backtests", [], set()
    for entry in (
        sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()) if folder.is_dir() else []
    ):
        try:
            modified, _ = tree_stats(entry)
        except FileNotFoundError:
            continue
        if not _expired(modified, policy.backtest_days, now):
            continue
        expired.add(entry)
        reports = {path for pattern in KEPT_REPORTS for path in entry.glob(pattern)}
        for path in _around(entry, reports) if reports else [entry]:
            leftover = _leftover(EXPIRED_BACKTEST, path)
            if leftover is not None:
                found.append(leftover)
    return found, expired


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
