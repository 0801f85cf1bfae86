"""``ranker study``: run every cell of a spec (reusing finished ones), then write the report."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ranking.core.workspace import Workspace
from ranking.study.report import StudyReport, build_report, write_report
from ranking.study.runner import StudyRunner
from ranking.study.spec import StudySpec, study_dir_for

if TYPE_CHECKING:
    from features.build_checks import WindowChecks
    from features.feast_repo import StoreSettings

ProgressCallback = Callable[[str, int, int, float], None]  # (cell key, done, total, elapsed seconds)


@dataclass(frozen=True)
class StudyRequest:
    """What ``ranker study`` asks for."""

    workspace: Workspace
    spec: StudySpec
    name: str | None = None  # study folder under <home>/studies (default study-<end>)
    parallel: int | None = None  # runs at a time (default: CPU cores)
    report_dir: Path | None = None  # also copy the report here
    on_progress: ProgressCallback | None = None
    # the window checks (the pipeline config's `window` section); None: WindowChecks' defaults
    window_checks: WindowChecks | None = None
    # the Feast store (the pipeline config's `features` section); None: the environment's
    store_settings: StoreSettings | None = None


@dataclass(frozen=True)
class StudyOutcome:
    study_dir: Path
    paths: dict[str, str]  # json | markdown | plot -> file
    report: StudyReport

    def summary(self) -> dict[str, JsonValue]:
        """What ``ranker study`` prints (``--json``; a seed's unreported change stays NaN)."""
        return {
            "study_dir": str(self.study_dir),
            "report": dict(self.paths),
            "runs": self.report.runs,
            "reused": self.report.reused,
            "wall_seconds": self.report.wall_seconds,
            "seed_comparison": [asdict(c) for c in self.report.seed_comparison],
        }


def run_study(request: StudyRequest) -> StudyOutcome:
    study_dir = study_dir_for(request.workspace, request.spec, request.name)
    runner = StudyRunner(
        request.workspace,
        request.spec,
        study_dir,
        parallel=request.parallel or max(1, os.cpu_count() or 1),
        on_progress=request.on_progress,
        window_checks=request.window_checks,
        store_settings=request.store_settings,
    )
    start = time.perf_counter()
    results = runner.run()
    report = build_report(request.spec, results, time.perf_counter() - start)
    paths = write_report(report, study_dir)
    if request.report_dir:
        request.report_dir.mkdir(parents=True, exist_ok=True)
        for p in paths.values():
            shutil.copy2(p, request.report_dir / Path(p).name)
    return StudyOutcome(study_dir=study_dir, paths=paths, report=report)
