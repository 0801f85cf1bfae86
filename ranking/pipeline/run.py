"""``ranker run`` — the whole retrain without Airflow: window → validate → train → gate → promote |
reject → metrics publish. Each step is the function behind the ``ranker`` subcommand the DAG calls
(:mod:`ranking.pipeline.steps`), called in this process with its typed request built from the
run's one effective config (:mod:`ranking.config.requests`), under one pipeline run id, so every
step's summary lands in ``<home>/pipeline/<run id>/<step>.json`` exactly as it would from the DAG.
What follows the gate is the promotion policy's answer
(:func:`ranking.pipeline.decide.decide_candidate`, the function behind ``ranker decide``, which
the DAG's branch calls too).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ranking.core.errors import RankerError
from ranking.core.summaries import RunSummary
from ranking.pipeline.policy import KEEP_CHAMPION, PROMOTE, request_problem
from ranking.pipeline.steps import StepOutcome

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.core.results import CommandResult
    from ranking.core.workspace import Workspace

log = logging.getLogger(__name__)


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

    def run(self, step: str, call: Callable[[], CommandResult]) -> StepOutcome: ...


@dataclass
class RunResult:
    summary: dict[str, Any]
    exit_code: int
    text: str


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
RUN_STEPS = ("window", "validate", "train", "gate", "promote", "reject", "metrics", "run")


@dataclass(frozen=True)
class Rerun:
    """What an earlier, unfinished attempt of the same run id left: its summaries now lie in
    ``pipeline/<run id>/attempts/<n>/``; a successful train (registered version) is kept."""

    attempt: int
    train: dict[str, Any] | None  # the kept train summary, when its version can be reused


def prepare_rerun(home: str, run_id: str, registry: str | None) -> Rerun | None:
    """Make ``pipeline/<run id>/`` hold only this attempt's summaries.

    A run id whose ``run`` summary recorded a decision (exit 0 or 1) is finished: refused, with
    nothing touched. Anything else there is an earlier attempt that failed or was killed: its
    summaries and failure records (of :data:`RUN_STEPS`) move to ``attempts/<n>/`` (so metrics and
    readers never mix two attempts), except a train summary whose registered version is complete,
    which this attempt reuses instead of training (and registering) again."""
    from ranking.core.atomic import read_json
    from ranking.core.workspace import Workspace

    folder = Workspace.resolve(home).pipeline / run_id
    if not folder.is_dir():
        return None
    previous = folder / "run.json"
    if previous.is_file():
        try:
            prior = read_json(previous)
        except (OSError, ValueError):
            prior = {}
        if isinstance(prior, dict) and prior.get("exit_code") in (0, 1) and not prior.get("error"):
            raise RankerError(
                f"run {run_id} already finished (gate {prior.get('decision') or '-'}, version"
                f" {prior.get('version') or '-'}, exit {prior['exit_code']}); its summaries are in"
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


def _recorded_train(train_path: Path, home: str, registry: str | None) -> dict[str, Any] | None:
    """An earlier attempt's train summary whose registered version is complete (None: none)."""
    from ranking.core.atomic import read_json
    from ranking.core.workspace import Workspace
    from ranking.registry import Registry

    if not train_path.is_file():
        return None
    try:
        train = read_json(train_path)
    except (OSError, ValueError):
        return None
    version = train.get("version") if isinstance(train, dict) else None
    if not isinstance(train, dict) or train.get("exit_code", 0) != 0 or not version or train.get("error"):
        return None
    return (
        train if Registry.for_workspace(Workspace.resolve(home), registry).is_complete(str(version)) else None
    )


def _registered_before_its_summary(home: str, run_id: str, registry: str | None) -> dict[str, Any] | None:
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
    return {**summary, "version": version, "exit_code": 0}


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


def execute(plan: RunPlan, home: str, run_id: str, runner: StepRunner) -> RunResult:
    """Run the pipeline; the returned summary is the `run` step's."""
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
) -> RunResult:
    from ranking.core.workspace import Workspace

    started = time.perf_counter()
    run = _Run(plan, Workspace.resolve(home), plan.config_of(home), run_id, runner, rerun)
    exit_code, finished = 0, False
    try:
        version = run.candidate()
        if run.promoted_by_an_earlier_attempt(version):
            exit_code = 0
        else:
            gate = run.judge(version)
            exit_code = run.serve(version, gate)
        finished = True
    except _StepFailed as failed:
        outcome = failed.outcome
        run.summary["error"] = (
            f"step {outcome.step} failed: {outcome.error or 'exit ' + str(outcome.exit_code)}"
        )
        run.summary["failed_step"] = outcome.step
        exit_code, finished = 2, True
    except RankerError as exc:  # between steps (e.g. the trained run could not be registered)
        run.summary["error"] = str(exc)
        run.summary["failed_step"] = runner.outcomes[-1].step if runner.outcomes else "run"
        exit_code, finished = 2, True
    finally:
        # a crash (not a RankerError) propagates after this, so it is published as a failure too
        failed_step = run.summary.get("failed_step") or (None if finished else "run")
        _publish_metrics(runner, run.effective, run.ws, run_id, failed_step)

    summary = run.summary
    summary["steps"] = [o.brief() for o in runner.outcomes]
    summary["champion"] = _champion(home, plan.registry)
    summary["duration_seconds"] = round(time.perf_counter() - started, 3)
    summary = RunSummary.model_validate(summary).body()  # a field that does not fit fails here
    text = (
        f"run {run_id}: version {summary['version'] or '-'}, gate {summary['decision'] or '-'}, "
        f"{'promoted' if summary['promoted'] else 'not promoted'}; champion {summary['champion'] or '(none)'}"
        + (f"; {summary['error']}" if "error" in summary else "")
    )
    return RunResult(summary, exit_code=exit_code, text=text)


class _Run:
    """One attempt's steps, each through its typed request from the run's one effective config;
    what they did accumulates in ``summary`` (the ``run`` step's)."""

    def __init__(
        self,
        plan: RunPlan,
        ws: Workspace,
        effective: EffectiveConfig,
        run_id: str,
        runner: StepRunner,
        rerun: Rerun | None,
    ) -> None:
        self.plan, self.ws, self.effective, self.run_id = plan, ws, effective, run_id
        self.runner, self.rerun = runner, rerun
        self.summary: dict[str, Any] = {
            "run_id": run_id,
            "end": plan.end.isoformat(),
            "days": effective.config.window.days,
            "dry_run": plan.dry_run,
            "decision": None,
            "version": None,
            "promoted": False,
            "forced": False,
            "kept_champion": False,
            "attempt": rerun.attempt if rerun else 1,
        }

    def _step(self, step: str, call: Callable[[], CommandResult], ok: tuple[int, ...] = (0,)) -> StepOutcome:
        outcome = self.runner.run(step, call)
        if outcome.exit_code not in ok:
            raise _StepFailed(outcome)
        return outcome

    def candidate(self) -> str:
        """Window, then train (or the version an earlier attempt trained): the registered version."""
        from ranking.config import requests
        from ranking.pipeline import steps

        config, end = self.effective.config, self.plan.end
        window = self._step("window", lambda: steps.window(requests.window_request(config, self.ws, end)))
        self.summary["days"] = window.summary.get("days", config.window.days)
        # the data before anything trains on it: a failing anomaly stops the run here (exit 2)
        validated = self.runner.run(
            "validate", lambda: steps.validate(requests.validation_request(config, self.ws, end))
        )
        if "verdict" in validated.summary:
            self.summary["validation"] = {
                "verdict": validated.summary["verdict"],
                "counts": validated.summary["counts"],
                "failing": sorted(
                    {a["kind"] for a in validated.summary["anomalies"] if a["policy"] == "fail"}
                ),
                "report": validated.summary["report"],
            }
        if validated.exit_code != 0:
            raise _StepFailed(validated)
        if self.rerun is not None and self.rerun.train is not None:
            trained = _reused_train(self.rerun, window.summary, self.run_id, self.runner)
        else:
            # resume (as the DAG does): an earlier attempt's run folder continues after its last
            # complete epoch instead of failing on the folder it left
            job = requests.train_job(self.effective, self.ws, end, run_id=self.run_id, resume=True)
            trained = self._step("train", lambda: steps.train(job)).summary
        version = _registered_version(trained, str(self.ws.root), self.run_id, self.plan.registry)
        self.summary["version"] = version
        return version

    def promoted_by_an_earlier_attempt(self, version: str) -> bool:
        """An earlier attempt of this run id promoted ``version`` and was killed before it recorded
        the promotion (the champion's last event is this run's): the run is done, not re-gated
        (the gate would refuse a candidate that already is the champion, forever)."""
        from ranking.registry import Registry

        if self.rerun is None:
            return False
        reg = Registry.for_workspace(self.ws, self.plan.registry)
        events = reg.history()
        if reg.champion() != version or not events:
            return False
        last = events[-1]
        if last.to_version != version or last.run_id != self.run_id:
            return False
        verdict = reg.verdict(version)
        self.summary["decision"] = verdict.decision if verdict else None
        self.summary["failed_checks"] = verdict.failed_checks if verdict else []
        self.summary["promoted"] = True
        log.info(
            "ranker run: %s became the champion in an earlier attempt of %s (event #%d): nothing left to do",
            version,
            self.run_id,
            last.seq,
        )
        return True

    def judge(self, version: str) -> StepOutcome:
        """The gate (exit 0 pass, 1 reject; anything else fails the run)."""
        from ranking.config.requests import gate_request
        from ranking.pipeline import steps

        request = gate_request(
            self.effective.config,
            self.ws,
            version,
            self.plan.end,
            registry=self.plan.registry,
            run_id=self.run_id,
        )
        gate = self._step("gate", lambda: steps.gate(request), ok=(0, 1))
        self.summary["decision"] = gate.summary.get("decision")
        self.summary["failed_checks"] = gate.summary.get("failed_checks", [])
        return gate

    def serve(self, version: str, gate: StepOutcome) -> int:
        """The promotion policy's branch (promote | record the rejection | keep the champion);
        the run's exit code: 1 for a recorded rejection (and a dry run the gate rejected)."""
        from ranking.pipeline import steps
        from ranking.registry import registry_url
        from ranking.registry.operations import PromoteRequest, RejectRequest

        decision = _decide(self.plan, str(self.ws.root), self.run_id, version)
        registry = registry_url(self.ws, self.plan.registry)
        reason = decision["reason"]
        if decision["branch"] == KEEP_CHAMPION:
            log.info("ranker run: keeping the champion: %s", reason)
            self.summary["kept_champion"] = not self.plan.dry_run
            return gate.exit_code if self.plan.dry_run else 0
        if decision["branch"] == PROMOTE:
            promote = PromoteRequest(
                registry, version, reason, force=bool(decision["force"]), run_id=self.run_id
            )
            promoted = self._step("promote", lambda: steps.promote(promote))
            self.summary["promoted"] = not promoted.summary.get("noop", False)
            self.summary["forced"] = bool(promoted.summary.get("forced"))
            return 0
        reject = RejectRequest(registry, version, reason, run_id=self.run_id)
        self._step("reject", lambda: steps.reject(reject))
        return 1


def _reused_train(rerun: Rerun, window: dict[str, Any], run_id: str, runner: StepRunner) -> dict[str, Any]:
    """The train summary of an earlier attempt whose version this one reuses (its window must be
    this attempt's); listed among the steps, not run again."""
    kept = rerun.train
    assert kept is not None
    if (kept.get("window") or {}).get("window_id") != window.get("window_id"):
        raise RankerError(
            f"the window of run {run_id} changed since its attempt that trained"
            f" {kept.get('version')} (source data replaced?): use a new --run-id"
        )
    log.info("ranker run: attempt %d reuses %s trained by an earlier one", rerun.attempt, kept["version"])
    runner.outcomes.append(StepOutcome("train", 0, kept, 0.0))
    return kept


def _publish_metrics(
    runner: StepRunner, effective: EffectiveConfig, ws: Any, run_id: str, failed_step: str | None
) -> None:
    """Publish whatever happened, like the DAG's final task; a failed publish never fails the run."""
    from ranking.config.requests import publish_request
    from ranking.pipeline import steps

    status = "failed" if failed_step else "success"
    try:
        published = runner.run(
            "metrics",
            lambda: steps.publish(
                publish_request(effective.config, ws, run_id, status=status, failed_step=failed_step)
            ),
        )
    except Exception as exc:  # monitoring must never turn a retrain into a failure
        log.warning("ranker run: metrics publish crashed: %s", exc)
        return
    if published.exit_code != 0:
        log.warning("ranker run: metrics publish failed: %s", published.error)


class _StepFailed(Exception):
    def __init__(self, outcome: StepOutcome) -> None:
        super().__init__(outcome.step)
        self.outcome = outcome


def _registered_version(train_summary: dict[str, Any], home: str, run_id: str, registry: str | None) -> str:
    """The version `ranker train` registered; registers its run folder if it did not."""
    version = train_summary.get("version")
    if version:
        return str(version)
    run_dir = train_summary.get("run_dir")
    if not run_dir:
        raise RankerError("`ranker train` reported neither a registered version nor a run_dir")
    from pathlib import Path

    from ranking.core.workspace import Workspace
    from ranking.registry import register_run

    return register_run(Workspace.resolve(home), Path(run_dir), run_id, registry)


def _decide(plan: RunPlan, home: str, run_id: str, version: str) -> dict[str, Any]:
    """The promotion policy's answer for the gated candidate (what `ranker decide` prints)."""
    from ranking.core.workspace import Workspace
    from ranking.pipeline.decide import DecideRequest, decide_candidate
    from ranking.registry import registry_url

    request = DecideRequest(
        registry=registry_url(Workspace.resolve(home), plan.registry),
        candidate=version,
        end=plan.end,
        dry_run=plan.dry_run,
        force_promote=plan.force_promote,
        reason=plan.reason,
        run_id=run_id,
    )
    return decide_candidate(request).body()


def _champion(home: str, registry: str | None) -> str | None:
    from ranking.core.workspace import Workspace
    from ranking.registry import Registry

    return Registry.for_workspace(Workspace.resolve(home), registry).champion()
