"""Two attempts of one `ranker run --run-id R` at once (issue 25.12): both used to run every step
into the same run folder and register a version each. The second is now refused before its first
step, in one line; once the first ends, the run id is free again."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ranking.core.errors import RankerError
from ranking.core.results import CommandResult
from ranking.pipeline.run import RunPlan, execute
from ranking.pipeline.steps import StepOutcome

PLAN = RunPlan(end=dt.date(2026, 1, 6))


class Steps:
    """A step runner whose steps all fail (the run stops after its window step); ``during`` runs
    inside the first step, while the attempt holds its run id."""

    def __init__(self, during: object = None) -> None:
        self.during = during
        self.outcomes: list[StepOutcome] = []
        self.calls: list[str] = []

    def run(self, step: str, call: Callable[[], CommandResult]) -> StepOutcome:
        self.calls.append(step)
        if self.during is not None and len(self.calls) == 1:
            self.during()  # type: ignore[operator]
        outcome = StepOutcome(step, 2, {}, 0.0, error="stopped by the test")
        self.outcomes.append(outcome)
        return outcome


def test_a_second_attempt_of_a_running_run_id_is_refused_before_any_step(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    second = Steps()
    refused: list[BaseException] = []

    def start_the_second() -> None:
        def attempt() -> None:
            try:
                execute(PLAN, home, "R", second)
            except RankerError as exc:
                refused.append(exc)

        thread = threading.Thread(target=attempt)  # another attempt, while the first is in a step
        thread.start()
        thread.join()

    first = Steps(during=start_the_second)
    result = execute(PLAN, home, "R", first)
    assert (
        result.summary is not None and result.summary.failed_step == "window" and first.calls[0] == "window"
    )
    assert second.calls == [], "the second attempt ran steps into the first one's run"
    assert len(refused) == 1
    message = str(refused[0])
    assert message.startswith("run R is already running") and "\n" not in message
    assert "--run-id" in message

    third = Steps()  # the first attempt ended: the run id is free again
    execute(PLAN, home, "R", third)
    assert third.calls[0] == "window"


def test_a_bad_run_id_is_refused_before_a_lock_is_made(tmp_path: Path) -> None:
    with pytest.raises(RankerError, match="invalid run id"):
        execute(PLAN, str(tmp_path / "home"), "../R", Steps())
    assert not (tmp_path / "home" / "pipeline").exists() and not (tmp_path / "R").exists()


def test_the_first_base_is_not_pretrained_by_a_second_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run id is held from the first base on: an attempt that finds it held pretrains nothing
    (it used to pretrain a base of its own before execute() refused it)."""
    from ranking.cli.main import main
    from ranking.pipeline.run import run_id_lock

    home = tmp_path / "home"
    home.mkdir()
    with run_id_lock(str(home), "R"):
        code = main(["run", "--end", "2026-01-06", "--home", str(home), "--run-id", "R", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "run R is already running" in err
    assert not (home / "pipeline" / "R-pretrain").exists()
