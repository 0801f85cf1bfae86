"""The train job (run_train_job): run folder, warm start and model config resolution, what a
torchrun worker is given, and a whole job that trains and registers."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest
from jobs import job_for

from features.windowgen import write_window
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.trainer.job import (
    LAUNCH_SUMMARY,
    resolve_model_config,
    resolve_warm_start,
    run_folder,
    run_train_job,
    worker_job,
)
from ranking.trainer.models.config import default_model_config, load_model_config
from tests.trainer.conftest import END


@pytest.fixture
def small_home(tmp_path: Path) -> Path:
    """A private two-day window (jobs here register into its registry)."""
    home = tmp_path / "home"
    write_window(home, END, 2, 300, seed=3, eval_rows=200)
    return home


def test_run_folder_is_out_else_the_run_id_under_runs(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    job = job_for(ws, END, days=3)
    assert run_folder(dataclasses.replace(job, out=Path("rel/run"))) == (Path.cwd() / "rel" / "run")
    assert run_folder(dataclasses.replace(job, run_id="day-1")) == ws.runs / "day-1"
    default = run_folder(job)
    assert default.parent == ws.runs and re.fullmatch(r"2026-11-10_3d-\d{8}T\d{6}", default.name)
    with pytest.raises(RankerError, match="invalid run id"):
        run_folder(dataclasses.replace(job, run_id="../elsewhere"))


def test_warm_start_is_none_the_champion_or_a_checkpoint(tmp_path: Path, trained: Path) -> None:
    ws = Workspace(tmp_path)
    assert resolve_warm_start(ws, "none") == (None, "none")
    assert resolve_warm_start(ws, "champion") == (None, "champion (none yet: from scratch)")
    assert resolve_warm_start(ws, "base") == (None, "base (none yet: from scratch)")
    assert resolve_warm_start(ws, str(trained)) == (trained / "model.pt", "path")  # a run folder
    assert resolve_warm_start(ws, str(trained / "model.pt")) == (trained / "model.pt", "path")
    with pytest.raises(RankerError, match="no checkpoint at"):
        resolve_warm_start(ws, str(tmp_path / "missing.pt"))


def test_model_config_is_the_file_else_the_resumed_run_else_the_warm_start_else_the_default(
    tmp_path: Path, trained: Path, model_config
) -> None:  # type: ignore[no-untyped-def]
    in_file = dataclasses.replace(model_config, cross_layers=1)
    (tmp_path / "cfg.json").write_text(in_file.to_json())
    resumed = dataclasses.replace(model_config, cross_rank=4)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "model_config.json").write_text(resumed.to_json())
    job = job_for(Workspace(tmp_path), END, model_config=tmp_path / "cfg.json", resume=True)
    warm = trained / "model.pt"
    assert resolve_model_config(job, run_dir, warm) == in_file
    job = dataclasses.replace(job, model_config=None)
    assert resolve_model_config(job, run_dir, warm) == resumed
    job = dataclasses.replace(job, resume=False)
    assert resolve_model_config(job, run_dir, warm) == model_config  # inside the checkpoint
    assert resolve_model_config(job, run_dir, None) == default_model_config()


def test_a_worker_gets_everything_resolved_and_registers_nothing(tmp_path: Path) -> None:
    job = job_for(
        Workspace(tmp_path),
        END,
        warm_start="champion",
        run_id="day-1",
        nproc=4,
        model_config=Path("cfg.json"),
    )
    run_dir = tmp_path / "runs" / "day-1"
    worker = worker_job(job, run_dir, tmp_path / "registry-cache" / "model.pt")
    assert worker.warm_start == str(tmp_path / "registry-cache" / "model.pt")
    assert worker.out == run_dir and worker.run_id is None and worker.nproc == 1
    assert worker.model_config == Path.cwd() / "cfg.json"
    assert not worker.register and worker.summary_file == run_dir / LAUNCH_SUMMARY
    assert worker_job(job, run_dir, None).warm_start == "none"
    unchanged = dataclasses.replace(
        worker,
        warm_start=job.warm_start,
        out=job.out,
        run_id=job.run_id,
        nproc=job.nproc,
        model_config=job.model_config,
        register=job.register,
        summary_file=job.summary_file,
    )
    assert unchanged == job  # everything else trains as asked


@pytest.mark.slow
def test_a_job_trains_registers_and_reports(
    small_home: Path, model_config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    ws = Workspace(small_home)
    job = job_for(
        ws,
        END,
        days=2,
        schedule="joint",
        epochs=1,
        batch_size=128,
        shuffle_buffer=500,
        model_config=model_config_file,
        run_id="day-1",
        progress=False,
        warm_start="champion",
    )
    summary = run_train_job(job)
    assert summary is not None and os.environ["OMP_NUM_THREADS"] == "1"  # one thread by default
    assert summary.version == "v0001" and summary.run_dir == str(ws.runs / "day-1")
    assert summary.warm_start.source == "champion (none yet: from scratch)"
    assert summary.schedule == "J" and summary.duration_seconds is not None and summary.duration_seconds > 0
    assert (ws.registry / "versions" / "v0001" / "version.json").is_file()  # committed
    assert load_model_config(ws.runs / "day-1" / "model_config.json") == load_model_config(model_config_file)

    # a worker's summary goes to its launcher's file, and nothing is registered
    worker = worker_job(dataclasses.replace(job, run_id="day-2"), ws.runs / "day-2", None)
    assert run_train_job(worker) is None
    handed = json.loads((ws.runs / "day-2" / LAUNCH_SUMMARY).read_text())
    assert handed["run_dir"] == str(ws.runs / "day-2") and "version" not in handed
    assert not (ws.registry / "versions" / "v0002").exists()


def test_bad_jobs_fail_before_training(small_home: Path, tmp_path: Path) -> None:
    ws = Workspace(small_home)
    job = job_for(ws, END, days=2, warm_start="none", register=False, out=tmp_path / "r")
    with pytest.raises(RankerError, match="--summary-file must lie in the run folder"):
        run_train_job(dataclasses.replace(job, summary_file=tmp_path / "elsewhere.json"))
    with pytest.raises(RankerError, match="exceeds 64"):
        run_train_job(dataclasses.replace(job, nproc=65))
    with pytest.raises(RankerError, match="no window manifest"):
        run_train_job(dataclasses.replace(job, days=5))
    assert not (tmp_path / "r").exists()
