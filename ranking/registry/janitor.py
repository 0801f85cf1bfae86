"""What `ranker gc` removes: what killed writers left behind, once nobody can still be writing it.

Leftovers:
- ``temp``: the temp files and folders of atomic writes (``.<name>.<random>.tmp``,
  ranking/core/atomic.py) anywhere under the workspace;
- ``export-scratch``: the export's file-backed tensors (``.export-*`` beside a run's ``model.pt``,
  ranking/trainer/checkpointing/state.py), tens of MB each;
- ``incomplete-version``: a registry version whose registration never wrote ``version.json``
  (the files were copied, then the writer died): it can never be used, and it holds a full copy
  of the model. Its ``claim.json`` stays, so the id is never handed out again (a run summary that
  named it must not come to mean another model).

A leftover is removed only when nothing may still be writing it: a live export holds the lock
file in its scratch folder (``filelock``; a lock held by a live process cannot be taken), a
live registration is named by its claim (host and pid, checked on this host), and anything
touched within the grace period is kept (writers on other hosts, and writers that hold no lock).
:func:`keep_reason` is that rule; the rest of this module finds leftovers and removes them.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from ranking.core.errors import RegistryError
from ranking.core.summaries import Summary
from ranking.registry.leftovers import Leftover, LeftoverRow, leftover_row, lock_held, tree_stats

if TYPE_CHECKING:
    from ranking.monitoring.delivery import Delivered
    from ranking.monitoring.disk import DiskUsage
    from ranking.registry.registry import Registry
    from ranking.registry.retention import RetentionPolicy

log = logging.getLogger(__name__)

EXPORT_SCRATCH_PREFIX = ".export-"
EXPORT_LOCK_FILE = ".lock"  # held (flock) by the export while its scratch folder is in use
DEFAULT_GRACE_SECONDS = 6 * 3600.0
CLAIM_FILE = "claim.json"
_TEMP_NAME = re.compile(r"\A\..+\.tmp\Z", re.DOTALL)

TEMP, EXPORT_SCRATCH, INCOMPLETE_VERSION = "temp", "export-scratch", "incomplete-version"
# an epoch checkpoint folder without its sidecar: the save died (a full disk); --resume skips it
INCOMPLETE_CHECKPOINT = "incomplete-checkpoint"
_EPOCH_FOLDER = re.compile(r"\Aepoch-\d+\Z", re.ASCII)


class GcDisk(Summary):
    """The disk after the collection (``ranking.monitoring.disk.DiskUsage``)."""

    bytes: dict[str, int]
    """bytes by kind of what the workspace holds"""
    free_bytes: int
    size_bytes: int


class GcDelivery(Summary):
    delivery: str
    """pushgateway | textfile"""
    target: str


class GcSummary(Summary):
    """``ranker gc``: what was removed, kept (and why) and could not be removed, and the disk."""

    removed: list[LeftoverRow]
    kept: list[LeftoverRow]
    failed: list[LeftoverRow]
    dry_run: bool
    grace_seconds: float
    bytes_freed: int
    """0 in a dry run"""
    disk: GcDisk
    metrics: GcDelivery | None = None
    """where the disk's series went (absent in a dry run: nothing is pushed)"""


@dataclass
class GcReport:
    removed: list[LeftoverRow] = field(default_factory=list)
    kept: list[LeftoverRow] = field(default_factory=list)  # with why
    failed: list[LeftoverRow] = field(default_factory=list)  # could not be removed (and why)
    dry_run: bool = False
    grace_seconds: float = DEFAULT_GRACE_SECONDS

    @property
    def bytes_freed(self) -> int:
        return sum(int(r["bytes"]) for r in self.removed) if not self.dry_run else 0

    def summary(self, usage: DiskUsage, delivered: Delivered | None = None) -> GcSummary:
        """The command's summary: this report, the disk after it and where its series went."""
        return GcSummary(
            removed=self.removed,
            kept=self.kept,
            failed=self.failed,
            dry_run=self.dry_run,
            grace_seconds=self.grace_seconds,
            bytes_freed=self.bytes_freed,
            disk=GcDisk(bytes=dict(usage.kinds), free_bytes=usage.free_bytes, size_bytes=usage.size_bytes),
            **(
                {"metrics": GcDelivery(delivery=delivered.delivery, target=delivered.target)}
                if delivered
                else {}
            ),
        )


def keep_reason(leftover: Leftover, now: float, grace_seconds: float) -> str | None:
    """Why ``leftover`` must stay (None: it may be removed)."""
    if leftover.held:
        return "held by a live process"
    age = now - leftover.modified
    if age < grace_seconds:
        return f"modified {age:.0f} s ago, within the {grace_seconds:.0f} s grace period"
    return None


# ---------------------------------------------------------------- the workspace


# the workspace's own folders (docs/architecture.md, "Workspace layout"): a `--home` pointed at a
# folder that holds other things too never has those searched
WORKSPACE_FOLDERS = (
    "runs",
    "windows",
    "registry",
    "cache",
    "pipeline",
    "metrics",
    "studies",
    "backtests",
    "feast",
)


def _folder_kind(parent: Path, name: str) -> str | None:
    """The leftover kind of the folder ``parent/name`` (None: not a leftover)."""
    if name.startswith(EXPORT_SCRATCH_PREFIX):
        return EXPORT_SCRATCH
    if _TEMP_NAME.match(name):
        return TEMP
    if (
        parent.name == "checkpoints"
        and _EPOCH_FOLDER.match(name)
        and not (parent / f"{name}.sha256").exists()
    ):
        return INCOMPLETE_CHECKPOINT
    return None


def _folder_held(kind: str, path: Path) -> bool:
    """A live process holds it: an export its scratch lock; a checkpoint being written its run's
    training job (the lock beside the run folder)."""
    if kind == EXPORT_SCRATCH:
        return lock_held(path / EXPORT_LOCK_FILE)
    if kind == INCOMPLETE_CHECKPOINT:
        run = path.parent.parent
        return lock_held(run.parent / f".{run.name}.train.lock")
    return False


def workspace_leftovers(root: Path) -> list[Leftover]:
    """Temp files/folders, export scratch folders and epoch checkpoints whose save died, in the
    workspace's own folders under ``root`` and directly in ``root`` (links are not followed)."""
    found: list[Leftover] = []
    if not root.is_dir():
        return found
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [name for name in dirs if name in WORKSPACE_FOLDERS or _TEMP_NAME.match(name)]
        for name in list(dirs):
            kind = _folder_kind(here, name)
            if kind is None:
                continue
            dirs.remove(name)  # never descend into what may be removed
            try:
                modified, size = tree_stats(here / name)
                held = _folder_held(kind, here / name)
            except FileNotFoundError:  # its writer finished (or another gc removed it)
                continue
            found.append(Leftover(kind, str(here / name), modified, size, held))
        for name in files:
            if _TEMP_NAME.match(name):
                try:
                    st = (here / name).lstat()
                except FileNotFoundError:
                    continue
                found.append(Leftover(TEMP, str(here / name), st.st_mtime, st.st_size))
    return sorted(found, key=lambda leftover: leftover.where)


def _remove_local(where: str) -> None:
    path = Path(where)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------- the registry


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


class Claim(TypedDict, total=False):
    """A version's ``claim.json`` (ranking.registry.registry.Registry._claim_version)."""

    claimed_at: str
    run_id: str | None
    host: str
    pid: int


def _claim_time(claim: Claim) -> float:
    try:
        return dt.datetime.fromisoformat(str(claim.get("claimed_at"))).timestamp()
    except ValueError:
        return 0.0


def registry_leftovers(reg: Registry) -> list[Leftover]:
    """Incomplete versions that still hold more than their claim."""
    found: list[Leftover] = []
    host = socket.gethostname()
    for version in reg.version_ids():
        if reg.is_complete(version):
            continue
        folder = f"versions/{version}"
        entries = reg.store.entries(folder)
        if all(name == CLAIM_FILE for name, _, _ in entries):
            continue  # already emptied: the claim alone keeps the id taken
        try:
            recorded = reg.store.read_json(f"{folder}/{CLAIM_FILE}")
        except RegistryError:  # no claim (or an unreadable one): known by its files alone
            recorded = None
        claim = cast(Claim, recorded) if isinstance(recorded, dict) else Claim()
        pid = claim.get("pid")
        held = claim.get("host") == host and isinstance(pid, int) and pid > 0 and _pid_alive(pid)
        modified = max([_claim_time(claim), *(m for _, _, m in entries if m is not None)])
        found.append(Leftover(INCOMPLETE_VERSION, folder, modified, sum(s for _, s, _ in entries), held))
    return found


# ---------------------------------------------------------------- the janitor


def collect_garbage(
    workspace_root: Path,
    reg: Registry | None,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    dry_run: bool = False,
    now: float | None = None,
    retention: RetentionPolicy | None = None,
) -> GcReport:
    """Remove the leftovers under ``workspace_root`` and in ``reg`` that :func:`keep_reason`
    lets go. A leftover that cannot be removed is reported, not raised (a janitor that runs
    at the start of every `ranker run` must not stop a retrain over a folder it cannot delete)."""
    now = time.time() if now is None else now
    report = GcReport(dry_run=dry_run, grace_seconds=grace_seconds)
    candidates = [(leftover, False) for leftover in workspace_leftovers(workspace_root)]
    if retention is not None:
        from ranking.registry.retention import retention_plan

        plan = retention_plan(workspace_root, reg, retention, now)
        candidates += [(leftover, False) for leftover in plan.leftovers]
        report.kept += plan.protected
    if reg is not None:
        candidates += [(leftover, True) for leftover in registry_leftovers(reg)]
    for leftover, in_registry in candidates:
        reason = keep_reason(leftover, now, grace_seconds)
        if reason is not None:
            report.kept.append(leftover_row(leftover, reason))
            continue
        if not dry_run:
            try:
                if in_registry and reg is not None:
                    for name, _, _ in reg.store.entries(leftover.where):
                        if name != CLAIM_FILE:
                            reg.store.remove(f"{leftover.where}/{name}")
                else:
                    _remove_local(leftover.where)
            except OSError as exc:
                log.warning("gc: cannot remove %s: %s", leftover.where, exc)
                report.failed.append(leftover_row(leftover, f"{type(exc).__name__}: {exc}"))
                continue
        report.removed.append(leftover_row(leftover))
    if report.removed:
        log.info(
            "gc: %s %d leftover(s), %.1f MiB",
            "would remove" if dry_run else "removed",
            len(report.removed),
            sum(int(r["bytes"]) for r in report.removed) / 2**20,
        )
    return report


def collect_for_workspace(
    home: str | None, registry: str | None = None, retention: RetentionPolicy | None = None
) -> GcReport:
    """`ranker gc` with its defaults for a workspace and its registry (``--registry``, else
    $RANKER_REGISTRY, else the workspace's), pruning by ``retention`` too (the config's
    ``[retention]``). Opening the registry checks that it can be reached (an object store's
    bucket exists): `ranker run` calls this first, before any training."""
    from ranking.core.workspace import Workspace
    from ranking.registry.registry import Registry, registry_url

    ws = Workspace.resolve(home)
    return collect_garbage(ws.root, Registry(registry_url(ws, registry)), retention=retention)
