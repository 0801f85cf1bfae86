"""Run one ``ranker`` step as a subprocess of the project environment and read its JSON summary.

Contract (docs/architecture.md): ``ranker <step> ... --json --home H --run-id R`` prints one JSON
object on stdout (logs go to stderr); exit 0 ok, 1 a negative decision, 2 a user-fixable error,
anything else a crash. User errors fail the task without retries; crashes are retried.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ranker_dags.json_values import Summary

log = logging.getLogger(__name__)

EXIT_OK, EXIT_NEGATIVE, EXIT_USER_ERROR = 0, 1, 2
_STDERR_TAIL_LINES = 30


class RankerStepCrashed(AirflowException):
    """The step died unexpectedly (exit code other than 0/1/2, or unreadable output): retryable."""


class RankerUserError(AirflowFailException):
    """The step reported a user-fixable error (exit 2): retrying cannot help."""


@dataclass(frozen=True)
class StepResult:
    exit_code: int
    summary: Summary = field(default_factory=dict)


def ranker_argv(ranker_bin: str, step_args: Sequence[str], *, home: str, run_id: str | None) -> list[str]:
    """The full command line of one step (common options go after the subcommand's own).

    Without a run id the step leaves no step summary (read-only look-ups such as `models list`)."""
    bad = [a for a in step_args if not isinstance(a, str) or "\x00" in a or "\n" in a]
    if bad:
        raise RankerUserError(f"refusing to run ranker with unsafe arguments: {bad!r}")
    argv = [ranker_bin, *step_args, "--json", "--home", home]
    return [*argv, "--run-id", run_id] if run_id else argv


def parse_summary(stdout: str) -> Summary:
    """The step's JSON summary: the last non-empty stdout line, which must be a JSON object."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise RankerStepCrashed("ranker printed no JSON summary on stdout")
    try:
        summary = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RankerStepCrashed(
            f"ranker's last stdout line is not JSON ({exc}): {lines[-1][:300]!r}"
        ) from None
    if not isinstance(summary, dict):
        raise RankerStepCrashed(f"ranker's summary is not a JSON object: {lines[-1][:300]!r}")
    return summary


def run_ranker(
    argv: Sequence[str],
    *,
    allowed_exit_codes: Sequence[int] = (EXIT_OK,),
    extra_env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> StepResult:
    """Run the step, streaming its stderr into the task log; map exit codes to Airflow outcomes.

    ``stdin``: what the step reads on its standard input (``ranker step``'s inputs), else nothing.
    The child is terminated if the task itself is stopped (execution_timeout, SIGTERM), so a timed
    out task leaves no training process behind.
    """
    env = {**os.environ, **(extra_env or {})}
    log.info("running: %s", shlex.join(argv))
    tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
    with (
        tempfile.TemporaryFile(mode="w+", encoding="utf-8") as stdout,
        tempfile.TemporaryFile(mode="w+", encoding="utf-8") as given,
    ):
        given.write(stdin or "")
        given.seek(0)
        proc = subprocess.Popen(
            list(argv),
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            stdin=given if stdin is not None else subprocess.DEVNULL,
        )
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                line = line.rstrip("\n")
                tail.append(line)
                log.info("%s", line)
            exit_code = proc.wait()
        except BaseException:
            _stop(proc)
            raise
        stdout.seek(0)
        out = stdout.read()
    step = " ".join(argv[1:3])
    if exit_code == EXIT_USER_ERROR:
        # a step that runs other steps (pretrain, run) ends its stderr with theirs (often a
        # library warning): its summary's error names the problem
        message = _summary_error(out) or next((t for t in reversed(tail) if t.strip()), "no message")
        raise RankerUserError(f"ranker {step}: {message}")
    if exit_code not in (EXIT_OK, EXIT_NEGATIVE):
        raise RankerStepCrashed(f"ranker {step} crashed with exit code {exit_code}: " + "\n".join(tail))
    try:
        summary = parse_summary(out)
    except RankerStepCrashed as exc:  # e.g. an uncaught exception (Python exits 1 too)
        raise RankerStepCrashed(f"ranker {step} exited {exit_code}: {exc}\n" + "\n".join(tail)) from None
    if exit_code not in allowed_exit_codes:
        raise RankerStepCrashed(f"ranker {step} exited {exit_code}, which this step does not expect")
    return StepResult(exit_code=exit_code, summary=summary)


def _summary_error(stdout: str) -> str | None:
    try:
        error = parse_summary(stdout).get("error")
    except RankerStepCrashed:
        return None
    return str(error) if error else None


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
