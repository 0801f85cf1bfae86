"""Two `ranker train` jobs into one run folder at once (issue 25, the standalone train's half of
item 12): both used to write the folder's checkpoints and register a version each. The second is
now refused in one line before it reads anything; once the first ends, the folder is free."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from jobs import job_for

from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.trainer.job import TrainJob, run_folder, run_folder_lock, run_train_job


def _job(tmp_path: Path) -> TrainJob:
    return job_for(Workspace.resolve(tmp_path / "home"), dt.date(2026, 1, 6), run_id="R")


def test_a_second_job_into_a_held_run_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    job = _job(tmp_path)
    with run_folder_lock(run_folder(job)), pytest.raises(RankerError) as refused:
        run_train_job(job)
    message = str(refused.value)
    assert "is in use by another training job" in message and "\n" not in message
    assert not (tmp_path / "home" / "runs" / "R").exists()  # nothing written into the folder


def test_once_the_first_job_ends_the_folder_is_free_again(tmp_path: Path) -> None:
    job = _job(tmp_path)
    with run_folder_lock(run_folder(job)):
        pass
    with pytest.raises(RankerError) as later:  # past the lock: the (missing) window is next
        run_train_job(job)
    assert "in use" not in str(later.value)
