"""Disk use of a workspace by kind and its filesystem's free space, as Prometheus series: ``ranker
gc`` measures them after it pruned and pushes them under its own job (``ranker_gc``: it never
replaces the retrain's group), else writes ``<home>/metrics/gc.prom`` for the textfile collector.

Kinds (:data:`~ranking.monitoring.catalogue.DISK_KINDS`) by the workspace's own folders
(docs/architecture.md "Workspace layout"): ``checkpoints`` (``runs/<id>/checkpoints/``), ``runs``
(the rest of the run folders), ``registry`` (a local registry, inside the workspace or not),
``windows``, ``backtests``, ``reviews``, ``feature_store`` (``feast/``), ``source`` and ``other``
(caches, step summaries, metrics state, studies). Sizes are the files' own (links are not followed:
a replay home's links to the workspace's source and windows count once).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ranking.monitoring.catalogue import CATALOGUE, DISK_KINDS, PREFIX
from ranking.monitoring.delivery import Delivered, deliver_samples
from ranking.monitoring.samples import Sample

GC_JOB = "ranker_gc"
TEXTFILE = "gc.prom"
_KIND_OF_FOLDER = {
    "registry": "registry",
    "windows": "windows",
    "backtests": "backtests",
    "reviews": "reviews",
    "feast": "feature_store",
    "source": "source",
}


@dataclass(frozen=True)
class DiskUsage:
    kinds: dict[str, int]  # bytes by kind (every one of DISK_KINDS; registry absent when remote)
    free_bytes: int  # available to the workspace's user on its filesystem
    size_bytes: int  # the filesystem's size


def _tree_bytes(top: Path) -> int:
    total = 0
    for folder, _, files in os.walk(top):  # os.walk follows no link into a folder by default
        for name in files:
            try:
                total += (Path(folder) / name).lstat().st_size
            except FileNotFoundError:  # removed while we walked
                continue
    return total


def measure(root: Path, registry: Path | None) -> DiskUsage:
    """Bytes by kind under the workspace ``root`` and in the local registry folder ``registry``
    (None: a remote registry, not measured), and the free and total bytes of ``root``'s filesystem."""
    kinds = dict.fromkeys(DISK_KINDS, 0)
    own = registry is not None and registry.resolve() == (root / "registry").resolve()
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if entry.is_symlink():
            continue
        if not entry.is_dir():
            kinds["other"] += entry.lstat().st_size
            continue
        kind = "runs" if entry.name == "runs" else _KIND_OF_FOLDER.get(entry.name, "other")
        if kind == "registry" and not own:  # not the registry in use
            kind = "other"
        kinds[kind] += _tree_bytes(entry)
        if kind == "runs":
            for run in entry.iterdir():
                if run.is_dir() and not run.is_symlink() and (run / "checkpoints").is_dir():
                    kinds["checkpoints"] += _tree_bytes(run / "checkpoints")
    kinds["runs"] -= kinds["checkpoints"]
    if registry is None:
        del kinds["registry"]
    elif not own:
        kinds["registry"] = _tree_bytes(registry) if registry.is_dir() else 0
    fs = os.statvfs(root if root.is_dir() else root.parent)
    return DiskUsage(kinds, fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize)


def _sample(short: str, value: float, **labels: str) -> Sample:
    name = PREFIX + short
    if tuple(labels) != CATALOGUE[name].labels:
        raise AssertionError(f"{name}: labels {tuple(labels)} != {CATALOGUE[name].labels}")
    return Sample(name, float(value), tuple(labels.items()))


class CollectedGarbage(Protocol):
    """What a gc's series read of its report (``ranking.registry.janitor.GcReport``: the registry
    is a layer above this one)."""

    @property
    def bytes_freed(self) -> int: ...

    @property
    def failed(self) -> Sequence[object]: ...  # the leftovers it could not remove


def gc_samples(usage: DiskUsage, report: CollectedGarbage, now: float) -> list[Sample]:
    """Series of one ``ranker gc``: the disk after it, what it freed and could not remove."""
    out = [_sample("disk_usage_bytes", size, kind=kind) for kind, size in usage.kinds.items()]
    out += [
        _sample("disk_free_bytes", usage.free_bytes),
        _sample("disk_size_bytes", usage.size_bytes),
        _sample("gc_timestamp_seconds", now),
        _sample("gc_freed_bytes", report.bytes_freed),
        _sample("gc_failed_leftovers", len(report.failed)),
    ]
    return out


def deliver(samples: list[Sample], pushgateway: str | None, metrics_dir: Path) -> Delivered:
    """Push when a Pushgateway is configured (the textfile when the push fails or there is none)."""
    return deliver_samples(samples, pushgateway, metrics_dir / TEXTFILE, GC_JOB)
