"""The in-process step runner of `ranker run` and `ranker pretrain`: a step's summary is recorded
as the command line records it; a user error is the step's exit 2 with a failure record; a crash
of ours propagates (a traceback and exit 70 for the whole command, never a quiet exit 2)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from ranking.core.errors import RankerError
from ranking.core.results import CommandResult
from ranking.core.workspace import Workspace
from ranking.pipeline.steps import InProcessSteps


def _steps(tmp_path: Path) -> InProcessSteps:
    return InProcessSteps(Workspace.resolve(tmp_path / "home"), "r1")


def test_a_step_summary_is_recorded_with_its_step_exit_code_and_run_id(tmp_path: Path) -> None:
    steps = _steps(tmp_path)
    outcome = steps.run("gate", lambda: CommandResult({"decision": "reject"}, exit_code=1, text="no"))
    recorded = json.loads((tmp_path / "home" / "pipeline" / "r1" / "gate.json").read_text())
    assert recorded == {"decision": "reject", "step": "gate", "exit_code": 1, "run_id": "r1"}
    assert outcome.summary == recorded and outcome.exit_code == 1 and outcome.error is None
    assert steps.outcomes == [outcome]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (RankerError("no champion to compare"), "no champion to compare"),
        (
            OSError(errno.ENOSPC, "No space left", "/full/disk"),
            "no space left on device (ENOSPC): /full/disk",
        ),
    ],
)
def test_a_user_error_is_the_steps_exit_2_and_its_failure_record(
    tmp_path: Path, error: Exception, message: str
) -> None:
    def failing() -> CommandResult:
        raise error

    steps = _steps(tmp_path)
    outcome = steps.run("window", failing)
    assert (outcome.step, outcome.exit_code, outcome.error) == ("window", 2, message)
    recorded = json.loads((tmp_path / "home" / "pipeline" / "r1" / "window.json").read_text())
    assert recorded == {"error": message, "step": "window", "exit_code": 2, "run_id": "r1"}


def test_a_crash_of_ours_propagates_and_records_nothing(tmp_path: Path) -> None:
    def crashing() -> CommandResult:
        raise KeyError("a bug")

    steps = _steps(tmp_path)
    with pytest.raises(KeyError):
        steps.run("train", crashing)
    assert not (tmp_path / "home" / "pipeline" / "r1" / "train.json").exists()
    assert steps.outcomes == []
