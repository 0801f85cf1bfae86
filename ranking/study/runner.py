"""Running a study: every cell as a ``ranker train`` subprocess (the production entry point), up
to ``parallel`` at a time, warm-start bases first. A finished cell leaves ``result.json`` with a
fingerprint of its inputs and is reused when the study is re-run with the same spec."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ranking.core.atomic import atomic_write_json, read_json
from ranking.core.hashing import sha256_file
from ranking.core.workspace import Workspace
from ranking.study.spec import BASELINE_SCHEDULE, WARM_INITS, Cell, StudyError, StudySpec, letters, plan_cells

if TYPE_CHECKING:
    from features.build_checks import WindowChecks
    from features.feast_repo import StoreSettings


class EpochEval(BaseModel):
    """A cell's model after one epoch on the eval day, as ``ranker train --json`` printed it
    (``EvalSummary``): the metrics the study compares; the others are kept as written."""

    model_config = ConfigDict(extra="allow")

    # as written: a JSON integer stays one
    save_hit_at_3: float | int
    auc: float | int
    ne: float | int

    def value(self, metric: str) -> float:
        return float(getattr(self, metric))


class CellResult(BaseModel):
    """A finished cell (``runs/<key>/result.json``), reused while its fingerprint matches."""

    # a result.json written by an older version keeps the keys this one no longer writes
    model_config = ConfigDict(extra="allow")

    cell: Cell
    key: str
    fingerprint: str
    window_id: str
    warm_from: str | None
    eval_by_epoch: list[EpochEval]
    loss_by_epoch: list[float | int]
    schedule: str
    seconds: float
    run_dir: str
    # this run found the cell finished (not recorded in result.json nor in the report's results)
    reused: bool = Field(default=False, exclude=True)


@dataclass
class StudyRunner:
    """Runs the study's cells as ``ranker train`` subprocesses and collects per-epoch metrics."""

    ws: Workspace
    spec: StudySpec
    study_dir: Path
    parallel: int = 2
    ranker: list[str] = field(default_factory=lambda: [sys.executable, "-m", "ranking.cli"])
    on_progress: Callable[[str, int, int, float], None] | None = None
    # the window checks (the pipeline config's `window` section); None: WindowChecks' defaults
    window_checks: WindowChecks | None = None
    # the Feast store (the pipeline config's `features` section); None: the environment's
    store_settings: StoreSettings | None = None

    def cell_dir(self, cell: Cell) -> Path:
        return self.study_dir / "runs" / cell.key

    def _fingerprint(self, cell: Cell, window_id: str, warm_from: str | None) -> str:
        spec = {
            "cell": asdict(cell),
            "window_id": window_id,
            "warm_from": warm_from,
            "epochs": self.spec.max_epochs if cell.init != "base" else 1,
            "pipeline": self.spec.pipeline,
            "batch_size": self.spec.batch_size,
            "model_config": sha256_file(self.spec.model_config)[:16] if self.spec.model_config else None,
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def cached(self, cell: Cell, fingerprint: str) -> CellResult | None:
        path = self.cell_dir(cell) / "result.json"
        if not path.exists():
            return None
        result = CellResult.model_validate(read_json(path))
        return result if result.fingerprint == fingerprint else None

    def run_cell(self, cell: Cell, end: dt.date, window_id: str, warm_from: Path | None) -> CellResult:
        fingerprint = self._fingerprint(cell, window_id, str(warm_from) if warm_from else None)
        hit = self.cached(cell, fingerprint)
        if hit is not None:
            hit.reused = True
            return hit
        out = self.cell_dir(cell)
        if out.exists():  # an unfinished or stale run: start it again from scratch
            shutil.rmtree(out)
        epochs = 1 if cell.init == "base" else self.spec.max_epochs
        cmd = [
            *self.ranker,
            "train",
            "--home",
            str(self.ws.root),
            "--end",
            end.isoformat(),
            "--days",
            str(cell.window_days),
            "--schedule",
            letters(cell.schedule, epochs),
            "--seed",
            str(cell.seed),
            "--pipeline",
            self.spec.pipeline,
            "--batch-size",
            str(self.spec.batch_size),
            "--warm-start",
            str(warm_from) if warm_from else "none",
            "--out",
            str(out),
            "--no-register",
            "--no-progress",
            "--json",
        ]
        if self.spec.model_config:
            cmd += ["--model-config", self.spec.model_config]
        if warm_from is not None:  # explicit: a pipeline config's warm_start_scope must not change a cell
            cmd += ["--warm-start-scope", "dense" if cell.init == "warm_dense" else "all"]
        threads = max(1, (os.cpu_count() or 1) // max(1, self.parallel))
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-5:]
            raise StudyError(f"study run {cell.key} failed (exit {proc.returncode}): {' | '.join(tail)}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])  # the train summary, as printed
        result = CellResult(
            cell=cell,
            key=cell.key,
            fingerprint=fingerprint,
            window_id=window_id,
            warm_from=str(warm_from) if warm_from else None,
            eval_by_epoch=[EpochEval.model_validate(e["eval"]) for e in summary["epochs"]],
            loss_by_epoch=[e["loss"] for e in summary["epochs"]],
            schedule=summary["schedule"],
            seconds=time.perf_counter() - start,
            run_dir=str(out),
        )
        atomic_write_json(out / "result.json", result.model_dump())
        return result

    def _run_all(
        self, jobs: Iterable[tuple[Cell, dt.date, str, Path | None]], done: int, total: int
    ) -> tuple[dict[str, CellResult], int]:
        results: dict[str, CellResult] = {}
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            futures = {pool.submit(self.run_cell, *job): job[0] for job in jobs}
            for fut in as_completed(futures):
                cell = futures[fut]
                results[cell.key] = fut.result()
                done += 1
                if self.on_progress:
                    self.on_progress(cell.key, done, total, time.perf_counter() - t0)
        return results, done

    def run(self) -> dict[str, CellResult]:
        from features.window import build_window

        spec = self.spec
        bases, cells = plan_cells(spec)
        windows: dict[tuple[dt.date, int], str] = {}
        needed = {(spec.end, w) for w in spec.windows}
        needed |= {(spec.warm_end(c.window_days), c.window_days) for c in bases}
        for end, w in sorted(needed):
            windows[(end, w)] = build_window(self.ws, end, w, self.window_checks, self.store_settings)[
                "window_id"
            ]
        total = len(bases) + len(cells)
        base_jobs = [
            (c, spec.warm_end(c.window_days), windows[(spec.warm_end(c.window_days), c.window_days)], None)
            for c in bases
        ]
        results, done = self._run_all(base_jobs, 0, total)

        def warm_from(cell: Cell) -> Path | None:
            if cell.init not in WARM_INITS:
                return None
            base = Cell(cell.window_days, BASELINE_SCHEDULE, cell.seed, "base")
            return Path(results[base.key].run_dir) / "model.pt"

        jobs = [(c, spec.end, windows[(spec.end, c.window_days)], warm_from(c)) for c in cells]
        more, _ = self._run_all(jobs, done, total)
        results.update(more)
        return results
