"""Running ``ranker`` steps in-process, each through its own parser and handler, under one pipeline
run id: every step's summary lands in ``<home>/pipeline/<run id>/<step>.json`` exactly as it would
from the DAG. ``ranker run`` hands this runner to :func:`ranking.pipeline.run.execute`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time

from ranking.cli.common import emit, workspace
from ranking.core.atomic import atomic_write_json
from ranking.core.errors import RankerError
from ranking.pipeline.run import StepOutcome

log = logging.getLogger(__name__)


class InProcessSteps:
    """Runs ``ranker`` subcommands in-process with shared --home/--run-id, recording summaries."""

    def __init__(
        self, parser: argparse.ArgumentParser, home: str, run_id: str, params: str | None = None
    ) -> None:
        self.parser = parser
        self.home = home
        self.run_id = run_id
        # the run's --params (a DAG run's Params): every step reads them, as from the DAG's tasks
        self.params = params
        self.outcomes: list[StepOutcome] = []

    def run(self, argv: list[str]) -> StepOutcome:
        full = [*argv, "--home", self.home, "--run-id", self.run_id, "--json"]
        if self.params:
            full += ["--params", self.params]
        log.info("ranker run: step: ranker %s", " ".join(full))
        started = time.perf_counter()
        try:
            args = self.parser.parse_args(full)
        except (RankerError, SystemExit) as exc:  # the CLI's parser raises UsageError
            name = "_".join(w for w in argv[:2] if not w.startswith("-"))
            error = f"`ranker {' '.join(argv)}` was refused by its parser: {exc}"
            print(f"ranker {name}: error: {exc}", file=sys.stderr)
            outcome = StepOutcome(name, 2, {}, time.perf_counter() - started, error=error)
            self.outcomes.append(outcome)
            return outcome
        step = str(args.step)
        try:
            result = args.handler(args)
        except (RankerError, OSError) as exc:
            from ranking.cli.main import as_user_error

            user_error = as_user_error(exc)
            if user_error is None:
                raise
            code, message = user_error.exit_code, str(user_error)
            outcome = StepOutcome(step, code, {}, time.perf_counter() - started, error=message)
            summary = {"step": step, "exit_code": code, "error": message, "run_id": self.run_id}
            with contextlib.suppress(OSError):  # the disk that failed the step may refuse this too
                atomic_write_json(workspace(args).step_summary_path(self.run_id, step), summary)
            self.outcomes.append(outcome)
            return outcome
        # the same recording as the CLI's; the step's JSON line goes to stderr, as a log line
        with contextlib.redirect_stdout(sys.stderr):
            emit(args, step, result)
        outcome = StepOutcome(step, result.exit_code, dict(result.summary), time.perf_counter() - started)
        self.outcomes.append(outcome)
        return outcome
