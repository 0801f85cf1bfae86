"""The workspace: one folder (``--home``, else $RANKER_HOME, else ./var) holding everything a
pipeline instance owns. Every component finds its files through this one map."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from ranking.core.errors import RankerError
from ranking.core.ids import validate_run_id

__all__ = ["Workspace", "validate_run_id"]


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None) -> Workspace:
        raw = home or os.environ.get("RANKER_HOME") or "var"
        root = Path(raw).expanduser().resolve()
        if root.exists() and not root.is_dir():
            raise RankerError(f"workspace {root} is not a folder (--home / $RANKER_HOME)")
        return cls(root)

    # source data written by `ranker data synth|import` (day-partitioned parquet)
    @property
    def source(self) -> Path:
        return self.root / "source"

    # Feast: feature_store.yaml, registry, online store (sqlite)
    @property
    def feast(self) -> Path:
        return self.root / "feast"

    # built windows: per-day example partitions + per-window manifests
    @property
    def windows(self) -> Path:
        return self.root / "windows"

    def window_manifest(self, end: dt.date, days: int) -> Path:
        """The manifest of the window ending at ``end`` (its eval day), ``days`` training days."""
        return self.windows / f"{end.isoformat()}_{int(days)}d" / "manifest.json"

    # training runs (`ranker train --out`, default runs/<run id>)
    @property
    def runs(self) -> Path:
        return self.root / "runs"

    # model registry root (local default; production passes an fsspec URL instead)
    @property
    def registry(self) -> Path:
        return self.root / "registry"

    # per pipeline-run step summaries: pipeline/<run_id>/<step>.json (read by metrics publish)
    @property
    def pipeline(self) -> Path:
        return self.root / "pipeline"

    # textfile-collector output when no Pushgateway is configured
    @property
    def metrics(self) -> Path:
        return self.root / "metrics"

    # schedule studies
    @property
    def studies(self) -> Path:
        return self.root / "studies"

    def step_summary_path(self, run_id: str, step: str) -> Path:
        return self.pipeline / validate_run_id(run_id) / f"{validate_run_id(step)}.json"
