"""The daily retrain graph as the DAG reads it: ``retrain_graph.json``, exported by ``make schema``
from its one declaration, ``ranking/pipeline/graph.py`` (the DAG's environment does not import
``ranking``; tests/pipeline/test_graph.py fails when the export is stale). Read at parse time:
a small JSON file, no heavy import."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

EXPORT = Path(__file__).with_name("retrain_graph.json")


@dataclass(frozen=True)
class GraphStep:
    name: str  # the task id; ``ranker step NAME``
    doc: str
    summary: str | None  # the step summary it records (None: none)
    label: str | None  # ranker_run_failures_total{step} (None: its failure is not the retrain's)
    result: str | None
    inputs: tuple[str, ...]  # upstream results it takes, by step name ("run": the run's outcome)
    after: tuple[str, ...]
    branches: tuple[str, ...]  # the steps its result's ``branch`` chooses between
    runs: str  # the trigger rule
    on_exit_1: str  # fails | not_yet | answers
    in_process: bool
    timeout_seconds: int
    retries: str  # none | transient | once
    trainer: bool
    outlet: str | None
    display: str | None
    noop: bool  # nothing to run (a branch that keeps things as they are)

    @property
    def upstream(self) -> tuple[str, ...]:
        return tuple(name for name in (*self.inputs, *self.after) if name != RUN)


@dataclass(frozen=True)
class RetrainGraph:
    steps: tuple[GraphStep, ...]
    run_input: str

    def __getitem__(self, name: str) -> GraphStep:
        return next(s for s in self.steps if s.name == name)

    def branch_of(self, name: str) -> GraphStep | None:
        return next((s for s in self.steps if name in s.branches), None)


def load(path: Path = EXPORT) -> RetrainGraph:
    raw = json.loads(path.read_text())
    steps = tuple(
        GraphStep(
            **{
                **{k: v for k, v in step.items()},
                "inputs": tuple(step["inputs"]),
                "after": tuple(step["after"]),
                "branches": tuple(step["branches"]),
            }
        )
        for step in raw["steps"]
    )
    return RetrainGraph(steps=steps, run_input=raw["run_input"])


RUN = "run"
RETRAIN = load()
if RETRAIN.run_input != RUN:
    raise ValueError(f"{EXPORT}: run_input is {RETRAIN.run_input!r}, the DAG knows {RUN!r}")
