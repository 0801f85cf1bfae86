"""``ranker step NAME``: one step of the daily retrain graph (ranking/pipeline/graph.py) in a
process of its own — how the Airflow DAG runs each of its tasks.

    ranker step gate --request '{"window_end": "2026-03-01", ...}' --params '{...}' \\
        --home H --run-id R --json < inputs.json

``--request`` is the run's :class:`~ranking.pipeline.graph.RetrainRequest` (the DAG hands its plan
task's value); the results of the steps this one takes (its ``inputs``: ``gate`` takes ``train``'s)
come as one JSON object on stdin, ``{"train": {...}}``, each read through its step's result model.
The step's summary is printed (``--json``) and recorded as ``ranker <command>`` would record it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from pydantic import BaseModel, ValidationError

from ranking.cli.common import CommandResult, Text, add_common, effective_config, workers_int, workspace
from ranking.cli.options import add_registry_option
from ranking.core.errors import RankerError
from ranking.pipeline.graph import RETRAIN, RUN, RetrainContext, RetrainRequest, RunOutcome

log = logging.getLogger(__name__)

# one step's upstream results: a gate summary with every slice is tens of KiB
MAX_INPUTS_BYTES = 16 * 2**20
request_arg = Text(64 * 1024)


def handle_step(args: argparse.Namespace) -> CommandResult[Any]:
    step = RETRAIN[args.name]
    try:
        request = RetrainRequest.model_validate_json(args.request)
    except ValidationError as exc:
        raise RankerError(f"--request is not a retrain request: {_first_error(exc)}") from None
    inputs = read_inputs(args.name, sys.stdin.read(MAX_INPUTS_BYTES + 1) if step.inputs else "")
    if step.summary is None:  # not a step of the run's record (the janitor, a branch with nothing to do)
        run_id, args.run_id = args.run_id or "", None
    elif not args.run_id:
        raise RankerError(f"ranker step {step.name} records its summary: give --run-id")
    else:
        run_id = args.run_id
    args.step = step.summary or step.name
    if step.call is None:
        return CommandResult(quiet=True)
    ctx = RetrainContext(request, effective_config(args), workspace(args), run_id, args.registry, args.nproc)
    result: CommandResult[Any] = step.call(ctx, **inputs)
    if result.text:  # the task log reads as the command's own output would (stdout is the JSON)
        log.info("%s", result.text)
    return result


def read_inputs(name: str, raw: str) -> dict[str, BaseModel]:
    """The upstream results step ``name`` takes, each through its model (one line on a bad one)."""
    step = RETRAIN[name]
    if not step.inputs:
        return {}
    if len(raw) > MAX_INPUTS_BYTES:
        raise RankerError(f"ranker step {name}: the inputs on stdin are over {MAX_INPUTS_BYTES:,} bytes")
    try:
        given = json.loads(raw) if raw.strip() else None
    except json.JSONDecodeError as exc:
        raise RankerError(f"ranker step {name}: the inputs on stdin are not JSON ({exc})") from None
    if not isinstance(given, dict) or sorted(given) != sorted(step.inputs):
        got = sorted(given) if isinstance(given, dict) else type(given).__name__
        raise RankerError(
            f"ranker step {name} takes {', '.join(step.inputs)} on stdin (a JSON object); got {got}"
        )
    out: dict[str, BaseModel] = {}
    for upstream, value in given.items():
        model = RunOutcome if upstream == RUN else RETRAIN[upstream].result
        assert model is not None  # graph_problem: a step's inputs return results
        try:
            out[upstream] = model.model_validate(value)
        except ValidationError as exc:
            raise RankerError(
                f"ranker step {name}: {upstream}'s result is not a {model.__name__}: {_first_error(exc)}"
            ) from None
    return out


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(the object)"
    return f"{where}: {first['msg']} ({exc.error_count()} problem(s))"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``step`` to ``ranker``."""
    p = sub.add_parser(
        "step",
        help="one step of the daily retrain graph, as the DAG runs it (inputs as JSON on stdin)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", choices=[s.name for s in RETRAIN], help="the step")
    p.add_argument("--request", type=request_arg, required=True, metavar="JSON", help="the run's request")
    p.add_argument("--nproc", type=workers_int, default=1, help="training processes (train)")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_step, step="step")
