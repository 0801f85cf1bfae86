"""The daily retrain, declared once: its steps, what each takes and returns, the edges and the
branch on the promotion decision.

``ranker run`` executes this graph in its process (:mod:`ranking.pipeline.run`); the Airflow DAG
``ranker_retrain`` builds one task per step from its export (``dags/ranker_dags/retrain_graph.json``,
written by ``make schema``: the DAG's environment does not import ``ranking``) and runs each as
``ranker step NAME`` (:mod:`ranking.cli.step`), handing it the run's request and the return values
of the steps it takes (``inputs``). What a step does is its ``call``: a typed request built from
the run's effective config (:mod:`ranking.config.requests`) handed to the step function of
:mod:`ranking.pipeline.steps`.

    python -m ranking.pipeline.graph          # rewrite dags/ranker_dags/retrain_graph.json
    python -m ranking.pipeline.graph --check  # exit 1 when it is stale
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, field_validator

from ranking.core.summaries import (
    DecideSummary,
    FreshnessSummary,
    GateSummary,
    MaterializeSummary,
    MetricsSummary,
    PromoteSummary,
    RejectSummary,
    TrackSummary,
    TrainSummary,
    ValidationSummary,
    WindowSummary,
)
from ranking.pipeline.policy import BRANCHES, KEEP_CHAMPION, PROMOTE, RECORD_REJECTION

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.config.model import PipelineConfig
    from ranking.core.results import CommandResult
    from ranking.core.workspace import Workspace
    from ranking.registry.janitor import GcSummary

EXPORT = Path(__file__).resolve().parents[2] / "dags" / "ranker_dags" / "retrain_graph.json"


class RetrainRequest(BaseModel):
    """What one retrain was asked: its eval day and the promotion flags (the run's Params are the
    config's ``--params`` layer, in its effective config). The DAG hands its plan task's value (a
    superset: the run id, the actor, each Param): what is not a field here is not the steps'."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    end: dt.date | None = Field(default=None, validation_alias=AliasChoices("end", "window_end"))
    """the window's end = its eval day (None: a run whose plan failed; only the steps that run
    whatever happened — the metrics publish, the janitor — run without one)"""
    dry_run: bool = False
    force_promote: bool = False
    reason: str | None = None

    @field_validator("reason")
    @classmethod
    def _blank_is_none(cls, reason: str | None) -> str | None:
        return reason.strip() or None if reason is not None else None


class RunOutcome(BaseModel):
    """The run so far, as the metrics publish takes it: succeeded, or which step failed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["success", "failed"]
    failed_step: str | None = None
    """the failed step's metrics label (``ranker_run_failures_total{step}``)"""


RUN = "run"  # the input name of the run's outcome so far (RunOutcome), not a step's result


@dataclass(frozen=True)
class RetrainContext:
    """What every step of one retrain sees: the request, the run's one effective config, the
    workspace, the run id and the registry (``--registry``; None: $RANKER_REGISTRY or the
    workspace's)."""

    request: RetrainRequest
    effective: EffectiveConfig
    ws: Workspace
    run_id: str
    registry: str | None = None
    nproc: int = 1  # training processes (the deployment's: ranker step train --nproc)

    @property
    def config(self) -> PipelineConfig:
        return self.effective.config

    @property
    def end(self) -> dt.date:
        if self.request.end is None:
            from ranking.core.errors import RankerError

            raise RankerError("this step needs the run's eval day: the request names none (window_end)")
        return self.request.end

    def registry_url(self) -> str:
        from ranking.registry import registry_url

        return registry_url(self.ws, self.registry)


class Runs(StrEnum):
    """When a step runs (Airflow's trigger rule of its task)."""

    AFTER_UPSTREAM = "all_success"
    AFTER_A_BRANCH = "none_failed_min_one_success"  # the one branch the decision took is done
    WHATEVER_HAPPENED = "all_done"


class OnExit1(StrEnum):
    """What exit 1 of a step means."""

    FAILS = "fails"  # not an answer this step gives: the run fails
    NOT_YET = "not_yet"  # ask again later (the scheduler retries with backoff)
    ANSWERS = "answers"  # a negative answer the run goes on with (the gate's rejection)


class Retries(StrEnum):
    NONE = "none"  # a deterministic step: a retry would fail the same way
    TRANSIENT = "transient"  # may fail for a while (a store, the network): the deployment's retries
    ONCE = "once"  # long and costly (training): at most one retry


StepCall = Callable[..., "CommandResult[Any]"]


@dataclass(frozen=True)
class Step:
    """One step of the retrain."""

    name: str
    """the step (the DAG's task id, ``ranker step NAME``)"""
    doc: str
    summary: str | None
    """the step summary it records, ``pipeline/<run id>/<summary>.json`` (None: none)"""
    label: str | None
    """its failures' label of ``ranker_run_failures_total{step}`` (None: not a failure of the run)"""
    result: type[BaseModel] | None
    """what it returns to the steps after it (None: nothing)"""
    call: StepCall | None
    """runs it: ``call(context, **inputs)`` (None: nothing to do, a branch that keeps things as they are)"""
    inputs: tuple[str, ...] = ()
    """the steps whose results it takes, by name (``RUN``: the run's outcome so far)"""
    after: tuple[str, ...] = ()
    """the steps it waits for without taking their results"""
    branches: tuple[str, ...] = ()
    """the steps its result chooses between (its result's ``branch`` names one)"""
    runs: Runs = Runs.AFTER_UPSTREAM
    on_exit_1: OnExit1 = OnExit1.FAILS
    in_process: bool = True
    """False: the scheduler's alone (waiting for data to land, serving features online, the
    janitor); ``ranker run`` is a retrain without them"""
    timeout: dt.timedelta = dt.timedelta(minutes=10)
    retries: Retries = Retries.TRANSIENT
    trainer: bool = False
    """runs where the deployment trains (a GPU node, a trainer container)"""
    outlet: str | None = None
    """the asset its success updates"""
    display: str | None = None
    """the name a person reads in the grid (a branch names the run's outcome)"""

    @property
    def upstream(self) -> tuple[str, ...]:
        return tuple(name for name in (*self.inputs, *self.after) if name != RUN)


@dataclass(frozen=True)
class Graph:
    """Steps in the order they run; each one's upstream is declared before it."""

    steps: tuple[Step, ...]
    by_name: dict[str, Step] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {s.name: s for s in self.steps})
        problem = graph_problem(self)
        if problem:
            raise ValueError(f"the retrain graph is malformed: {problem}")

    def __getitem__(self, name: str) -> Step:
        return self.by_name[name]

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def branch_of(self, name: str) -> Step | None:
        """The step whose decision chooses ``name`` (None: ``name`` is not a branch)."""
        return next((s for s in self.steps if name in s.branches), None)

    def failure_labels(self) -> dict[str, str]:
        """Step name -> its failures' metrics label, in pipeline order."""
        return {s.name: s.label for s in self.steps if s.label is not None}

    def export(self) -> dict[str, JsonValue]:
        """The graph as the DAG reads it (names, edges, policy; not the Python calls)."""
        return {
            "comment": "generated by `python -m ranking.pipeline.graph` (make schema) from "
            "ranking/pipeline/graph.py: do not edit",
            "request": RetrainRequest.model_json_schema(by_alias=True),
            "run_input": RUN,
            "steps": [
                {
                    "name": s.name,
                    "doc": s.doc,
                    "summary": s.summary,
                    "label": s.label,
                    "result": s.result.__name__ if s.result else None,
                    "inputs": list(s.inputs),
                    "after": list(s.after),
                    "branches": list(s.branches),
                    "runs": s.runs.value,
                    "on_exit_1": s.on_exit_1.value,
                    "in_process": s.in_process,
                    "timeout_seconds": int(s.timeout.total_seconds()),
                    "retries": s.retries.value,
                    "trainer": s.trainer,
                    "outlet": s.outlet,
                    "display": s.display,
                    "noop": s.call is None,
                }
                for s in self.steps
            ],
        }


def graph_problem(graph: Graph) -> str | None:
    """What makes ``graph`` unrunnable (None: nothing)."""
    seen: set[str] = set()
    for s in graph.steps:
        if s.name in seen:
            return f"step {s.name} is declared twice"
        missing = [u for u in s.upstream if u not in seen]
        if missing:
            return f"step {s.name} needs {', '.join(missing)}, not declared before it"
        if s.branches and (s.result is None or "branch" not in s.result.model_fields):
            return f"step {s.name} chooses branches but its result names none"
        seen.add(s.name)
    for s in graph.steps:
        unknown = [b for b in s.branches if b not in seen]
        if unknown:
            return f"step {s.name} chooses {', '.join(unknown)}, which are not steps"
    return None


# ------------------------------------------------------------------------------------------
# what each step does
# ------------------------------------------------------------------------------------------


def _check_freshness(ctx: RetrainContext) -> CommandResult[FreshnessSummary]:
    from features.window import FreshnessRequest
    from ranking.pipeline import steps

    lag = ctx.config.window.max_source_lag_hours
    return steps.freshness(FreshnessRequest(ctx.ws, None, lag), ctx.end)


def _build_window(ctx: RetrainContext) -> CommandResult[WindowSummary]:
    from ranking.config.requests import window_request
    from ranking.pipeline import steps

    return steps.window(window_request(ctx.config, ctx.ws, ctx.end))


def _validate_window(ctx: RetrainContext) -> CommandResult[ValidationSummary]:
    from ranking.config.requests import validation_request
    from ranking.pipeline import steps

    return steps.validate(validation_request(ctx.config, ctx.ws, ctx.end))


def _train(ctx: RetrainContext) -> CommandResult[TrainSummary]:
    from ranking.config.requests import train_job
    from ranking.pipeline import steps

    # resume: a retry continues after the last complete epoch of the run folder
    # (<home>/runs/<run id>) instead of failing on the folder the first try left
    job = train_job(ctx.effective, ctx.ws, ctx.end, run_id=ctx.run_id, resume=True, nproc=ctx.nproc)
    return steps.train(job)


def _gate(ctx: RetrainContext, train: TrainSummary) -> CommandResult[GateSummary]:
    from ranking.config.requests import gate_request
    from ranking.core.errors import RankerError
    from ranking.pipeline import steps

    if not train.version:
        raise RankerError(f"the train step registered no version (run folder {train.run_dir})")
    request = gate_request(
        ctx.config, ctx.ws, train.version, ctx.end, registry=ctx.registry, run_id=ctx.run_id
    )
    return steps.gate(request)


def _decide(ctx: RetrainContext, gate: GateSummary) -> CommandResult[DecideSummary]:
    from ranking.pipeline import steps
    from ranking.pipeline.decide import DecideRequest

    request = DecideRequest(
        registry=ctx.registry_url(),
        candidate=gate.candidate.version,
        end=ctx.end,
        dry_run=ctx.request.dry_run,
        force_promote=ctx.request.force_promote,
        reason=ctx.request.reason,
        run_id=ctx.run_id,
    )
    return steps.decide(request)


def _promote(ctx: RetrainContext, decide: DecideSummary) -> CommandResult[PromoteSummary]:
    from ranking.pipeline import steps
    from ranking.registry.operations import PromoteRequest

    request = PromoteRequest(
        ctx.registry_url(), decide.version, decide.reason, force=decide.force, run_id=ctx.run_id
    )
    return steps.promote(request)


def _record_rejection(ctx: RetrainContext, decide: DecideSummary) -> CommandResult[RejectSummary]:
    from ranking.pipeline import steps
    from ranking.registry.operations import RejectRequest

    return steps.reject(RejectRequest(ctx.registry_url(), decide.version, decide.reason, run_id=ctx.run_id))


def _materialize_online(ctx: RetrainContext) -> CommandResult[MaterializeSummary]:
    from ranking.pipeline import steps

    settings = ctx.config.features.store_settings()
    return steps.materialize(steps.MaterializeRequest(ctx.ws, ctx.end, settings))


def _publish_metrics(ctx: RetrainContext, run: RunOutcome) -> CommandResult[MetricsSummary]:
    from ranking.config.requests import publish_request
    from ranking.pipeline import steps

    request = publish_request(ctx.config, ctx.ws, ctx.run_id, status=run.status, failed_step=run.failed_step)
    return steps.publish(request)


def _track(ctx: RetrainContext, run: RunOutcome) -> CommandResult[TrackSummary]:
    from ranking.tracking.hooks import track_retrain

    return track_retrain(ctx.ws, ctx.effective, ctx.run_id, ctx.registry_url(), run)


def _collect_garbage(ctx: RetrainContext) -> CommandResult[GcSummary]:
    from ranking.config.requests import retention_policy
    from ranking.pipeline import steps

    config = ctx.config
    request = steps.GcRequest(
        ctx.ws, ctx.registry_url(), retention=retention_policy(config), pushgateway=config.metrics.pushgateway
    )
    return steps.collect_garbage(request)


_MINUTES = dt.timedelta(minutes=1)

RETRAIN = Graph(
    (
        Step(
            "check_freshness",
            "has the eval day landed in the source? (exit 1 until it has: asked again with backoff)",
            summary="freshness",
            label="freshness",
            result=FreshnessSummary,
            call=_check_freshness,
            on_exit_1=OnExit1.NOT_YET,
            in_process=False,
        ),
        Step(
            "build_window",
            "the training window and eval day from the feature store (point-in-time joins)",
            summary="window",
            label="window",
            result=WindowSummary,
            call=_build_window,
            after=("check_freshness",),
            timeout=120 * _MINUTES,
        ),
        Step(
            "validate_window",
            "the window's data validation: a failing anomaly stops the run",
            summary="validate",
            label="validate",
            result=ValidationSummary,
            call=_validate_window,
            after=("build_window",),
            timeout=30 * _MINUTES,
            retries=Retries.NONE,
        ),
        Step(
            "train",
            "train the candidate on the window and register it",
            summary="train",
            label="train",
            result=TrainSummary,
            call=_train,
            after=("validate_window",),
            timeout=8 * 60 * _MINUTES,
            retries=Retries.ONCE,
            trainer=True,
        ),
        Step(
            "gate",
            "judge the candidate against the champion on the eval day (exit 1: rejected)",
            summary="gate",
            label="gate",
            result=GateSummary,
            call=_gate,
            inputs=("train",),
            on_exit_1=OnExit1.ANSWERS,
            timeout=60 * _MINUTES,
            retries=Retries.NONE,
        ),
        Step(
            "decide",
            "the promotion policy on the gate's verdict: promote, record the rejection or keep the champion",
            summary="decide",
            label="gate",
            result=DecideSummary,
            call=_decide,
            inputs=("gate",),
            branches=BRANCHES,
            timeout=2 * _MINUTES,
            retries=Retries.NONE,
        ),
        Step(
            PROMOTE,
            "make the candidate the champion",
            summary="promote",
            label="promote",
            result=PromoteSummary,
            call=_promote,
            inputs=("decide",),
            outlet="champion",
            display="outcome: promoted",
        ),
        Step(
            RECORD_REJECTION,
            "record why the candidate was not promoted",
            summary="reject",
            label="reject",
            result=RejectSummary,
            call=_record_rejection,
            inputs=("decide",),
            display="outcome: REJECTED by the gate",
        ),
        Step(
            KEEP_CHAMPION,
            "nothing to do: a dry run, or a rerun of a day whose model was already promoted",
            summary=None,
            label=None,
            result=None,
            call=None,
            after=("decide",),
            display="outcome: champion kept",
        ),
        Step(
            "materialize_online",
            "serve the eval day's features from the online store",
            summary="materialize",
            label="materialize",
            result=MaterializeSummary,
            call=_materialize_online,
            after=(PROMOTE, RECORD_REJECTION, KEEP_CHAMPION),
            runs=Runs.AFTER_A_BRANCH,
            in_process=False,
            timeout=60 * _MINUTES,
        ),
        Step(
            "publish_metrics",
            "the run's metrics, whatever happened (a failed publish never fails the run)",
            summary="metrics",
            label="metrics",
            result=MetricsSummary,
            call=_publish_metrics,
            inputs=(RUN,),
            after=("materialize_online",),
            runs=Runs.WHATEVER_HAPPENED,
        ),
        Step(
            "track",
            "the run as one MLflow run (experiment ranker-retrain), whatever happened; MLflow down:"
            " queued for `ranker tracking replay`, never a failure of the run",
            summary="track",
            label=None,
            result=TrackSummary,
            call=_track,
            inputs=(RUN,),
            after=("publish_metrics",),
            runs=Runs.WHATEVER_HAPPENED,
            timeout=5 * _MINUTES,
        ),
        Step(
            "collect_garbage",
            "what [retention] lets go and the disk's series (job ranker_gc); last, never holding up a"
            " promotion; its failure is not the retrain's",
            summary=None,
            label=None,
            result=None,
            call=_collect_garbage,
            after=("publish_metrics",),
            runs=Runs.WHATEVER_HAPPENED,
            in_process=False,
            timeout=30 * _MINUTES,
        ),
    )
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the export is stale")
    parser.add_argument("--out", type=Path, default=EXPORT)
    args = parser.parse_args(argv)
    text = json.dumps(RETRAIN.export(), indent=1, sort_keys=True) + "\n"
    if args.check:
        if not args.out.is_file() or args.out.read_text() != text:
            print(f"{args.out} is stale: run `make schema`", file=sys.stderr)
            return 1
        return 0
    from ranking.core.atomic import atomic_write_text

    atomic_write_text(args.out, text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
