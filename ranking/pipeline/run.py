"""``ranker run`` — the whole retrain without Airflow: the daily retrain graph
(:data:`ranking.pipeline.graph.RETRAIN`, the one the DAG builds its tasks from) executed in this
process — window → validate → train → gate → decide → promote | record the rejection | keep the
champion, then the report (after the gate), the metrics publish and the MLflow record (the ``track``
step), whatever happened. The scheduler's own steps (waiting for the source, serving features
online, the janitor) are not run here. Each step is called with the run's
one effective config and the results of the steps it takes, under one pipeline run id, so every
step's summary lands in ``<home>/pipeline/<run id>/<step>.json`` exactly as it would from the DAG.

What only an attempt of ``ranker run`` knows is here: a rerun of the same run id reuses the
version an earlier attempt trained, and ends at once when that attempt already promoted it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from ranking.core.errors import RankerError
from ranking.core.results import CommandResult
from ranking.core.summaries import (
    DecideSummary,
    Decision,
    GateSummary,
    PromoteSummary,
    RunSummary,
    StepBrief,
    TrainSummary,
    ValidationBrief,
    ValidationSummary,
    WindowSummary,
)
from ranking.pipeline.graph import (
    RETRAIN,
    RUN,
    OnExit1,
    RetrainContext,
    RetrainRequest,
    RunOutcome,
    Runs,
    Step,
)
from ranking.pipeline.policy import KEEP_CHAMPION, RECORD_REJECTION, request_problem
from ranking.pipeline.steps import StepOutcome

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig

log = logging.getLogger(__name__)
S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True)
class RunPlan:
    """What ``ranker run`` was asked to do (validated before any step runs)."""

    end: dt.date
    # the run's config: defaults < env < file < the run's flags < --params; every step's request
    # is built from it (None: the workspace's, without flags)
    effective: EffectiveConfig | None = None
    dry_run: bool = False
    force_promote: bool = False
    reason: str | None = None
    registry: str | None = None

    def __post_init__(self) -> None:
        problem = request_problem(dry_run=self.dry_run, force_promote=self.force_promote, reason=self.reason)
        if problem:
            raise RankerError(problem)

    def config_of(self, home: str) -> EffectiveConfig:
        if self.effective is not None:
            return self.effective
        from ranking.config.loader import load
        from ranking.core.workspace import Workspace

        return load(Workspace.resolve(home).root)


def new_run_id(end: dt.date) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"manual__{end.isoformat()}__{stamp}-{secrets.token_hex(2)}"


class StepRunner(Protocol):
    """Runs one step in this process and records its outcome
    (:class:`ranking.pipeline.steps.InProcessSteps`)."""

    outcomes: list[StepOutcome]

    def run(self, step: str, call: Callable[[], CommandResult[Any]]) -> StepOutcome: ...


@contextlib.contextmanager
def registry_env(url: str | None) -> Iterator[None]:
    """`ranker train` finds the registry through $RANKER_REGISTRY: point it at --registry too."""
    if url is None:
        yield
        return
    from ranking.registry import REGISTRY_ENV

    before = os.environ.get(REGISTRY_ENV)
    os.environ[REGISTRY_ENV] = url
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(REGISTRY_ENV, None)
        else:
            os.environ[REGISTRY_ENV] = before


ATTEMPTS = "attempts"
# the steps whose summaries (and failure records) `ranker run` writes; others under the same run
# id (a `features freshness --run-id R` before it, as the DAG runs) belong to the caller
RUN_STEPS = (
    *(s.summary for s in RETRAIN if s.in_process and s.summary is not None),
    "run",
)


@dataclass(frozen=True)
class Rerun:
    """What an earlier, unfinished attempt of the same run id left: its summaries now lie in
    ``pipeline/<run id>/attempts/<n>/``; a successful train (registered version) is kept."""

    attempt: int
    train: TrainSummary | None  # the kept train summary, when its version can be reused


def prepare_rerun(home: str, run_id: str, registry: str | None) -> Rerun | None:
    """Make ``pipeline/<run id>/`` hold only this attempt's summaries.

    A run id whose ``run`` summary recorded a decision (exit 0 or 1) is finished: refused, with
    nothing touched. Anything else there is an earlier attempt that failed or was killed: its
    summaries and failure records (of :data:`RUN_STEPS`) move to ``attempts/<n>/`` (so metrics and
    readers never mix two attempts), except a train summary whose registered version is complete,
    which this attempt reuses instead of training (and registering) again."""
    from ranking.core.workspace import Workspace

    folder = Workspace.resolve(home).pipeline / run_id
    if not folder.is_dir():
        return None
    prior = _read(folder / "run.json", _Finished)
    if prior is not None and prior.exit_code in (0, 1) and not prior.error:
        raise RankerError(
            f"run {run_id} already finished (gate {prior.decision or '-'}, version"
            f" {prior.version or '-'}, exit {prior.exit_code}); its summaries are in"
            f" {folder}: use a new --run-id"
        )
    entries = [
        path
        for step in RUN_STEPS
        for path in (folder / f"{step}.json", folder / "failures" / f"{step}.json")
        if path.is_file()
    ]
    if not entries:
        return None
    train_path = folder / "train.json"
    keep = _recorded_train(train_path, home, registry) or _registered_before_its_summary(
        home, run_id, registry
    )
    done = [int(p.name) for p in (folder / ATTEMPTS).glob("*") if p.name.isdigit()]
    attempt = max(done, default=0) + 1
    target = folder / ATTEMPTS / str(attempt)
    target.mkdir(parents=True)
    for entry in entries:
        if keep is not None and entry == train_path:
            continue
        dest = target / entry.relative_to(folder)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(entry, dest)
    log.info("ranker run: earlier attempt of %s moved to %s", run_id, target)
    return Rerun(attempt=attempt + 1, train=keep)


class _Finished(BaseModel):
    """What says a recorded ``run`` summary (of any age) finished: a decision, not an error."""

    exit_code: int | None = None
    error: str | None = None
    decision: str | None = None
    version: str | None = None


def _read(path: Path, model: type[S]) -> S | None:
    """A summary an earlier attempt recorded, through its model (None: absent, torn or not one)."""
    from ranking.core.atomic import read_json

    if not path.is_file():
        return None
    try:
        return model.model_validate(read_json(path))
    except (OSError, ValueError):  # a torn write, or not a summary of this model (ValidationError)
        return None


def _recorded_train(train_path: Path, home: str, registry: str | None) -> TrainSummary | None:
    """An earlier attempt's train summary whose registered version is complete (None: none)."""
    from ranking.core.workspace import Workspace
    from ranking.registry import Registry

    train = _read(train_path, TrainSummary)
    if train is None or train.exit_code != 0 or not train.version or train.error:
        return None
    return (
        train
        if Registry.for_workspace(Workspace.resolve(home), registry).is_complete(train.version)
        else None
    )


def _registered_before_its_summary(home: str, run_id: str, registry: str | None) -> TrainSummary | None:
    """The train summary of an attempt killed after it registered its version and before its
    train.json was written: the summary it kept in its run folder, with the version the registry
    holds for this run id and this very model file (None: nothing registered)."""
    from ranking.core.atomic import read_json
    from ranking.core.hashing import sha256_file
    from ranking.core.workspace import Workspace
    from ranking.registry import Registry
    from ranking.trainer.job import TRAIN_SUMMARY_FILE

    ws = Workspace.resolve(home)
    run_dir = ws.runs / run_id
    kept, model = run_dir / TRAIN_SUMMARY_FILE, run_dir / "model.pt"
    if not (kept.is_file() and model.is_file()):
        return None
    try:
        summary = read_json(kept)
    except (OSError, ValueError):
        return None
    version = Registry.for_workspace(ws, registry).version_of_run(run_id, sha256_file(model))
    if version is None or not isinstance(summary, dict):
        return None
    log.info(
        "ranker run: %s was registered by a killed attempt of %s before its summary: reused", version, run_id
    )
    return TrainSummary.model_validate({**summary, "version": version, "exit_code": 0})


RUN_LOCK = ".run.lock"  # in pipeline/<run id>/: held by the attempt of that run id in progress


def run_id_lock(home: str, run_id: str) -> contextlib.AbstractContextManager[None]:
    """Hold ``run_id`` for this attempt. A second attempt of the same run id while one runs is
    refused in one line: it would train into the same run folder and register a second version."""
    from ranking.core.locks import held_or_refused
    from ranking.core.workspace import Workspace

    path = Workspace.resolve(home).step_summary_path(run_id, "run").with_name(RUN_LOCK)
    return held_or_refused(
        path,
        f"run {run_id} is already running (another attempt holds {path}): wait for it to finish, or use a new --run-id",
    )


def execute(plan: RunPlan, home: str, run_id: str, runner: StepRunner) -> CommandResult[RunSummary]:
    """Run the pipeline; the result's summary is the `run` step's."""
    from ranking.registry.janitor import collect_for_workspace

    with run_id_lock(home, run_id), registry_env(plan.registry):
        # first: an unreachable registry (a missing bucket) fails before any training, and what
        # killed attempts left (export scratch, temp folders, incomplete versions) goes (`ranker gc`)
        from ranking.config.requests import retention_policy

        collect_for_workspace(home, plan.registry, retention_policy(plan.config_of(home).config))
        rerun = prepare_rerun(home, run_id, plan.registry)
        return _execute(plan, home, run_id, runner, rerun)


def _execute(
    plan: RunPlan, home: str, run_id: str, runner: StepRunner, rerun: Rerun | None = None
) -> CommandResult[RunSummary]:
    from ranking.core.workspace import Workspace

    started = time.perf_counter()
    ws = Workspace.resolve(home)
    request = RetrainRequest(
        end=plan.end, dry_run=plan.dry_run, force_promote=plan.force_promote, reason=plan.reason
    )
    ctx = RetrainContext(request, plan.config_of(home), ws, run_id, plan.registry)
    run = _Run(ctx, runner, rerun)
    exit_code, finished = 0, False
    try:
        exit_code = run.through_the_graph()
        finished = True
    except _StepFailed as failed:
        outcome = failed.outcome
        run.so_far.error = f"step {outcome.step} failed: {outcome.error or 'exit ' + str(outcome.exit_code)}"
        run.so_far.failed_step = outcome.step
        exit_code, finished = 2, True
    except RankerError as exc:  # between steps (e.g. the trained run could not be registered)
        run.so_far.error = str(exc)
        run.so_far.failed_step = runner.outcomes[-1].step if runner.outcomes else "run"
        exit_code, finished = 2, True
    finally:
        # a crash (not a RankerError) propagates after this, so it is published as a failure too
        failed_step = run.so_far.failed_step or (None if finished else "run")
        run.publish(failed_step)

    steps = [o.brief() for o in runner.outcomes]
    summary = run.so_far.summary(steps, _champion(ctx), round(time.perf_counter() - started, 3))
    text = (
        f"run {run_id}: version {summary.version or '-'}, gate {summary.decision or '-'}, "
        f"{'promoted' if summary.promoted else 'not promoted'}; champion {summary.champion or '(none)'}"
        + (f"; {summary.error}" if summary.error else "")
    )
    return CommandResult(summary, exit_code=exit_code, text=text)


@dataclass
class RunSoFar:
    """What the ``run`` summary says so far; its fields left None are not set in the summary
    (the gate's failed checks only once it ran, the error and failed step only on a failure)."""

    run_id: str
    end: dt.date
    days: int | None
    dry_run: bool
    attempt: int
    decision: Decision | None = None
    version: str | None = None
    promoted: bool = False
    forced: bool = False
    kept_champion: bool = False
    failed_checks: list[str] | None = None
    failed_step: str | None = None
    error: str | None = None
    validation: ValidationBrief | None = None

    def summary(self, steps: list[StepBrief], champion: str | None, duration_seconds: float) -> RunSummary:
        summary = RunSummary(
            run_id=self.run_id,
            end=self.end,
            days=self.days,
            dry_run=self.dry_run,
            attempt=self.attempt,
            decision=self.decision,
            version=self.version,
            promoted=self.promoted,
            forced=self.forced,
            kept_champion=self.kept_champion,
            steps=steps,
            champion=champion,
            duration_seconds=duration_seconds,
        )
        when_set: dict[str, list[str] | str | ValidationBrief | None] = {
            "failed_checks": self.failed_checks,
            "failed_step": self.failed_step,
            "error": self.error,
            "validation": self.validation,
        }
        return summary.model_copy(update={k: v for k, v in when_set.items() if v is not None})


class _Run:
    """One attempt through the graph's in-process steps; what they did accumulates in ``so_far``
    (the ``run`` step's summary)."""

    def __init__(self, ctx: RetrainContext, runner: StepRunner, rerun: Rerun | None) -> None:
        self.ctx, self.runner, self.rerun = ctx, runner, rerun
        self.results: dict[str, BaseModel] = {}
        self.so_far = RunSoFar(
            run_id=ctx.run_id,
            end=ctx.end,
            days=ctx.config.window.days,
            dry_run=ctx.request.dry_run,
            attempt=rerun.attempt if rerun else 1,
        )

    def through_the_graph(self) -> int:
        """Each in-process step in the graph's order, the branch the decision chose and no other;
        the run's exit code (1: the gate's rejection recorded, or a dry run the gate rejected)."""
        gate_exit = 0
        for step in RETRAIN:
            if not step.in_process or step.runs is Runs.WHATEVER_HAPPENED:
                continue  # the scheduler's, or the publish (whatever happened: see _execute)
            chooser = RETRAIN.branch_of(step.name)
            if chooser is not None and getattr(self.results[chooser.name], "branch", None) != step.name:
                continue
            if step.name == KEEP_CHAMPION:
                log.info("ranker run: keeping the champion: %s", self._decision().reason)
                self.so_far.kept_champion = not self.ctx.request.dry_run
                return gate_exit if self.ctx.request.dry_run else 0
            outcome = self._train() if step.name == "train" else self._run(step)
            if step.name == "gate":
                gate_exit = outcome.exit_code
                self._write_report()
            if step.name == "train" and self._promoted_by_an_earlier_attempt():
                return 0
        return 1 if RECORD_REJECTION in self.results else 0

    def _run(self, step: Step) -> StepOutcome:
        assert step.call is not None and step.summary is not None
        call, inputs = step.call, {name: self.results[name] for name in step.inputs}
        outcome = self.runner.run(step.summary, lambda: call(self.ctx, **inputs))
        if outcome.result is not None and outcome.result.summary is not None:
            self.results[step.name] = outcome.result.summary
            self._note(outcome.result.summary)
        allowed = (0, 1) if step.on_exit_1 is OnExit1.ANSWERS else (0,)
        if outcome.exit_code not in allowed:
            raise _StepFailed(outcome)
        return outcome

    def _train(self) -> StepOutcome:
        """The train step, or the version an earlier attempt of this run id trained."""
        if self.rerun is not None and self.rerun.train is not None:
            outcome = _reused_train(self.rerun, self.results["build_window"], self.ctx.run_id, self.runner)
        else:
            outcome = self._run(RETRAIN["train"])
        trained = outcome.result.summary if outcome.result is not None else None
        assert isinstance(trained, TrainSummary)
        version = _registered_version(trained, self.ctx)
        self.results["train"] = trained.model_copy(update={"version": version})
        self.so_far.version = version
        return outcome

    def _write_report(self) -> None:
        """report.md and the labelled curve.png in the run folder once the gate judged, as the
        DAG's gate task writes them (``ranker report``'s function); for people: a failure is a
        warning, never the run's."""
        from ranking.trainer.reports.run_report import write_run_report

        try:
            written = write_run_report(self.ctx.ws, self.ctx.run_id)
        except Exception as exc:
            log.warning("ranker run: no run report: %s", exc)
            return
        log.info("ranker run: report %s (curve: %s)", written.report, written.curve)

    def _note(self, result: BaseModel) -> None:
        """What the run summary says of a step's result."""
        if isinstance(result, WindowSummary):
            self.so_far.days = result.days
        elif isinstance(result, ValidationSummary):
            self.so_far.validation = ValidationBrief(
                verdict=result.verdict,
                counts=result.counts,
                failing=sorted({a.kind for a in result.anomalies if a.policy == "fail"}),
                report=result.report,
            )
        elif isinstance(result, GateSummary):
            self.so_far.decision = result.decision
            self.so_far.failed_checks = result.failed_checks
        elif isinstance(result, PromoteSummary):
            self.so_far.promoted = not result.noop
            self.so_far.forced = result.forced

    def _decision(self) -> DecideSummary:
        decision = self.results["decide"]
        assert isinstance(decision, DecideSummary)
        return decision

    def _promoted_by_an_earlier_attempt(self) -> bool:
        """An earlier attempt of this run id promoted the version and was killed before it recorded
        the promotion (the champion's last event is this run's): the run is done, not re-gated
        (the gate would refuse a candidate that already is the champion, forever)."""
        from ranking.registry import Registry

        if self.rerun is None:
            return False
        version, run_id = self.so_far.version, self.ctx.run_id
        reg = Registry.for_workspace(self.ctx.ws, self.ctx.registry)
        events = reg.history()
        if reg.champion() != version or not events:
            return False
        last = events[-1]
        if last.to_version != version or last.run_id != run_id:
            return False
        verdict = reg.verdict(version)
        self.so_far.decision = verdict.decision if verdict else None
        self.so_far.failed_checks = verdict.failed_checks if verdict else []
        self.so_far.promoted = True
        log.info(
            "ranker run: %s became the champion in an earlier attempt of %s (event #%d): nothing left to do",
            version,
            run_id,
            last.seq,
        )
        return True

    def publish(self, failed_step: str | None) -> None:
        """The graph's in-process steps that run whatever happened, in order (the metrics publish,
        the MLflow record); none of them ever fails the run."""
        labels = {s.summary: s.label for s in RETRAIN if s.summary}
        outcome = RunOutcome(
            status="failed" if failed_step else "success",
            failed_step=labels.get(failed_step, failed_step) if failed_step else None,
        )
        for step in RETRAIN:
            if not step.in_process or step.runs is not Runs.WHATEVER_HAPPENED:
                continue
            assert step.call is not None and step.summary is not None
            inputs: dict[str, BaseModel] = {RUN: outcome} if RUN in step.inputs else {}
            try:
                done = self.runner.run(step.summary, functools.partial(step.call, self.ctx, **inputs))
            except Exception as exc:  # monitoring and tracking never turn a retrain into a failure
                log.warning("ranker run: %s crashed: %s", step.name, exc)
                continue
            if done.exit_code != 0:
                log.warning("ranker run: %s failed: %s", step.name, done.error)


def _reused_train(rerun: Rerun, window: BaseModel, run_id: str, runner: StepRunner) -> StepOutcome:
    """The train summary of an earlier attempt whose version this one reuses (its window must be
    this attempt's); listed among the steps, not run again."""
    kept = rerun.train
    assert kept is not None and isinstance(window, WindowSummary)
    if kept.window.window_id != window.window_id:
        raise RankerError(
            f"the window of run {run_id} changed since its attempt that trained"
            f" {kept.version} (source data replaced?): use a new --run-id"
        )
    log.info("ranker run: attempt %d reuses %s trained by an earlier one", rerun.attempt, kept.version)
    outcome = StepOutcome("train", 0, kept.body(), 0.0, result=CommandResult(kept))
    runner.outcomes.append(outcome)
    return outcome


class _StepFailed(Exception):
    def __init__(self, outcome: StepOutcome) -> None:
        super().__init__(outcome.step)
        self.outcome = outcome


def _registered_version(trained: TrainSummary, ctx: RetrainContext) -> str:
    """The version `ranker train` registered; registers its run folder if it did not."""
    if trained.version:
        return trained.version
    if not trained.run_dir:
        raise RankerError("`ranker train` reported neither a registered version nor a run_dir")
    from ranking.registry import register_run

    return register_run(ctx.ws, Path(trained.run_dir), ctx.run_id, ctx.registry)


def _champion(ctx: RetrainContext) -> str | None:
    from ranking.registry import Registry

    return Registry.for_workspace(ctx.ws, ctx.registry).champion()
