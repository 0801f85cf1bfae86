"""The CLI runner: argv building, summary parsing and the exit-code contract, against real
subprocesses (small Python programs standing in for `ranker` so each exit path is exercised)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from ranker_dags.ranker_cli import (
    RankerStepCrashed,
    RankerUserError,
    parse_summary,
    ranker_argv,
    run_ranker,
)


def program(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "step.py"
    script.write_text("import json, os, sys\n" + textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_common_options_follow_the_subcommand() -> None:
    argv = ranker_argv("/x/ranker", ["features", "window", "--end", "2026-01-24"], home="/h", run_id="r1")
    assert argv == [
        "/x/ranker",
        "features",
        "window",
        "--end",
        "2026-01-24",
        "--json",
        "--home",
        "/h",
        "--run-id",
        "r1",
    ]


def test_lookups_leave_no_step_summary() -> None:
    assert ranker_argv("/x/ranker", ["models", "list"], home="/h", run_id=None) == [
        "/x/ranker",
        "models",
        "list",
        "--json",
        "--home",
        "/h",
    ]


def test_unsafe_arguments_are_refused() -> None:
    with pytest.raises(RankerUserError, match="unsafe"):
        ranker_argv("/x/ranker", ["promote", "v1", "--reason", "a\nb"], home="/h", run_id="r1")


def test_summary_is_the_last_json_line() -> None:
    assert parse_summary('feast says hi\n\n{"rows": 3}\n\n') == {"rows": 3}
    with pytest.raises(RankerStepCrashed, match="no JSON summary"):
        parse_summary("  \n")
    with pytest.raises(RankerStepCrashed, match="not JSON"):
        parse_summary('{"rows": 3}\ndone\n')
    with pytest.raises(RankerStepCrashed, match="not a JSON object"):
        parse_summary("[1, 2]\n")


def test_success_returns_the_summary_and_sees_extra_env(tmp_path: Path) -> None:
    argv = program(
        tmp_path,
        """
        print("log line", file=sys.stderr)
        print(json.dumps({"actor": os.environ["RANKER_ACTOR"]}))
        """,
    )
    result = run_ranker(argv, extra_env={"RANKER_ACTOR": "alice"})
    assert (result.exit_code, result.summary) == (0, {"actor": "alice"})


def test_negative_decision_is_a_result_where_allowed(tmp_path: Path) -> None:
    argv = program(tmp_path, 'print(json.dumps({"decision": "reject"})); sys.exit(1)')
    assert run_ranker(argv, allowed_exit_codes=(0, 1)).summary == {"decision": "reject"}
    with pytest.raises(RankerStepCrashed, match="does not expect"):
        run_ranker(argv)


def test_user_error_fails_without_retry_and_names_the_problem(tmp_path: Path) -> None:
    argv = program(
        tmp_path,
        'print("ranker train: error: window 2026-01-24_20d not built", file=sys.stderr); sys.exit(2)',
    )
    with pytest.raises(RankerUserError, match="window 2026-01-24_20d not built") as info:
        run_ranker(argv)
    assert isinstance(info.value, AirflowFailException)  # Airflow skips the retries


def test_user_error_prefers_the_summarys_error_over_the_last_stderr_line(tmp_path: Path) -> None:
    argv = program(
        tmp_path,
        """
        print("pretrain: step train failed", file=sys.stderr)
        print("  warnings.warn(", file=sys.stderr)
        print(json.dumps({"error": "step train failed: --resume: run r1 has another config"}))
        sys.exit(2)
        """,
    )
    with pytest.raises(RankerUserError, match="another config") as info:
        run_ranker(argv)
    assert "warnings.warn" not in str(info.value)


def test_crash_is_retryable_and_carries_the_stderr_tail(tmp_path: Path) -> None:
    argv = program(tmp_path, 'print("Segmentation fault", file=sys.stderr); sys.exit(139)')
    with pytest.raises(RankerStepCrashed, match="exit code 139") as info:
        run_ranker(argv)
    assert "Segmentation fault" in str(info.value)
    assert not isinstance(info.value, AirflowFailException)


def test_success_without_summary_is_a_crash(tmp_path: Path) -> None:
    with pytest.raises(RankerStepCrashed, match="no JSON summary"):
        run_ranker(program(tmp_path, "pass"))


def test_uncaught_exception_is_a_crash_not_a_decision(tmp_path: Path) -> None:
    """Python exits 1 on an uncaught exception, the code of a negative decision: no summary tells them apart."""
    argv = program(tmp_path, 'raise TypeError("forward() got an unexpected keyword argument")')
    with pytest.raises(RankerStepCrashed, match="exited 1") as info:
        run_ranker(argv, allowed_exit_codes=(0, 1))
    assert "unexpected keyword argument" in str(info.value)
