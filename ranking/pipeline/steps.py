"""The pipeline's steps as functions: a typed request in (``ranking.config.requests`` builds each
from the effective config), a :class:`~ranking.core.results.CommandResult` out — the step's
summary, exit code and the text a person reads.

The ``ranker`` subcommands are these functions behind a parser; ``ranker run`` and ``ranker
pretrain`` call them in this process through :class:`InProcessSteps`, which records each step's
summary in ``<home>/pipeline/<run id>/<step>.json`` as the command line does, so the metrics
exporter and the DAG read the same files whoever ran the step.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from ranking.core import killpoints
from ranking.core.errors import RankerError, as_user_error
from ranking.core.results import CommandResult, record_summary
from ranking.core.summaries import (
    DecideSummary,
    FreshnessSummary,
    GateSummary,
    MaterializeSummary,
    MetricsSummary,
    PromoteSummary,
    RejectSummary,
    StepBrief,
    StepError,
    TrainSummary,
    ValidationSummary,
    WindowSummary,
)
from ranking.core.workspace import Workspace
from ranking.registry.janitor import DEFAULT_GRACE_SECONDS

if TYPE_CHECKING:
    from features.feast_repo import StoreSettings
    from features.validation.step import ValidationRequest
    from features.window import FreshnessRequest, WindowRequest
    from ranking.gate.run import GateRequest
    from ranking.monitoring.publish import PublishRequest
    from ranking.pipeline.decide import DecideRequest
    from ranking.registry.janitor import GcSummary
    from ranking.registry.operations import PromoteRequest, RejectRequest
    from ranking.registry.retention import RetentionPolicy
    from ranking.tracking.settings import TrackingSettings
    from ranking.trainer.job import TrainJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MaterializeRequest:
    """Serve the features as of the end of day ``end`` from the online store."""

    workspace: Workspace
    end: dt.date | None
    settings: StoreSettings


def freshness(request: FreshnessRequest, end: dt.date) -> CommandResult[FreshnessSummary]:
    """Has the eval day ``end`` landed in the source? Exit 0 when it has, 1 when not yet (the
    scheduler waits and asks again); a source lagging past ``max_lag_hours`` is an error (exit 2)."""
    from features.window import freshness as source_freshness

    s = source_freshness(request)
    text = f"latest source day {s.latest_source_date}, lag {s.lag_seconds / 3600:.1f} h"
    problem = not_landed(s, end)
    if problem:
        return CommandResult(s, exit_code=1, text=f"{text}: {problem}")
    return CommandResult(s, text=text)


def not_landed(summary: FreshnessSummary, end: dt.date) -> str | None:
    """Why a window ending ``end`` cannot be built yet (None when its eval day is in the source)."""
    latest = summary.latest_source_date
    if latest is None:
        return "the source has no data at all (latest_source_date is empty)"
    if latest < end:
        return f"source data ends at {latest}; the window's eval day {end} has not landed yet"
    return None


def window(request: WindowRequest) -> CommandResult[WindowSummary]:
    from features.window import window_step

    s = window_step(request)
    repaired = f" ({len(s.days_repaired)} rebuilt: no longer matched their record)" if s.days_repaired else ""
    text = (
        f"window {s.end} ({s.days}d): {s.rows_train:,} train rows, {s.rows_eval:,} eval rows,"
        f" {s.days_built} days built, {s.days_reused} reused{repaired} -> {s.manifest}"
    )
    return CommandResult(s, text=text)


def validate(request: ValidationRequest) -> CommandResult[ValidationSummary]:
    """Exit 0 when no anomaly fails the window (warnings listed), 2 with one line naming the first
    that does (the summary, with every anomaly, is recorded all the same)."""
    from features.validation.step import failure_line, validate_window

    s = validate_window(request)
    counts = s.counts
    text = (
        f"validation {s.verdict}: window {s.end} ({s.days}d), {counts['fail']} failing, {counts['warn']} warning,"
        f" {counts['accepted']} accepted anomalies -> {s.report}"
    )
    shown = [a for a in s.anomalies if a.policy != "accepted"][:20]
    lines = [
        text,
        *(
            f"  [{a.policy}] {a.kind}{' ' + a.feature if a.feature else ''} {a.day or ''}: {a.detail}"
            for a in shown
        ),
    ]
    if s.verdict == "fail":
        return CommandResult(s, exit_code=2, text="\n".join(lines), error=failure_line(s))
    return CommandResult(s, text="\n".join(lines))


def train(job: TrainJob) -> CommandResult[TrainSummary]:
    from ranking.trainer.job import run_train_job

    summary = run_train_job(job)
    if summary is None:  # a non-zero rank, or a worker whose launcher reports
        return CommandResult(quiet=True)
    return CommandResult(summary, text=train_text(summary))


def train_text(s: TrainSummary) -> str:
    lines = [f"run {s.run_dir}  schedule {s.schedule}  pipeline {s.pipeline}  seed {s.seed}"]
    for e in s.epochs:
        ev = e.eval
        lines.append(
            f"  epoch {e.epoch} [{e.phase:6}] loss {e.loss:.4f}  {e.samples_per_second:,.0f} samples/s"
            f"  lookup {e.lookup_ratio:.1%} (exposed {e.exposed_lookup_ratio:.1%})"
            + (f"  HIT@3 {ev.save_hit_at_3:.4f} AUC {ev.auc:.4f}" if ev else "")
        )
    ev = s.eval
    lines.append(f"eval: save HIT@3 {ev.save_hit_at_3:.4f}  AUC {ev.auc:.4f}  NE {ev.ne:.4f}")
    if s.version:
        lines.append(f"registered as {s.version}")
    return "\n".join(lines)


def gate(request: GateRequest) -> CommandResult[GateSummary]:
    """Exit 0 when the candidate passes, 1 when the gate rejects it."""
    from ranking.gate.run import gate_candidate

    result = gate_candidate(request)
    s = result.summary
    champion = s.champion.version if s.champion else None
    lines = [
        f"gate {s.decision}: {s.candidate.version} vs {champion or 'no champion (first run)'} on {s.eval_date}"
    ]
    lines += [f"  [{'ok' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in s.checks]
    return CommandResult(s, exit_code=0 if result.passed else 1, text="\n".join(lines))


def decide(request: DecideRequest) -> CommandResult[DecideSummary]:
    """The promotion policy's answer; exit 0 whatever the branch (acting on it is the next step's)."""
    from ranking.pipeline.decide import decide_candidate

    s = decide_candidate(request)
    return CommandResult(s, text=f"{s.branch}{' --force' if s.force else ''}: {s.reason}")


def promote(request: PromoteRequest) -> CommandResult[PromoteSummary]:
    from ranking.registry.operations import promote as promote_version

    s = promote_version(request)
    if s.noop:
        text = f"{s.version} already is the champion; nothing changed"
    else:
        text = f"champion: {s.previous or '(none)'} -> {s.version}" + (" (forced)" if s.forced else "")
    return CommandResult(s, text=text)


def reject(request: RejectRequest) -> CommandResult[RejectSummary]:
    from ranking.registry.operations import reject as reject_version

    s = reject_version(request)
    return CommandResult(s, text=f"recorded rejection of {s.version}: {s.reason}")


def materialize(request: MaterializeRequest) -> CommandResult[MaterializeSummary]:
    """Load the online store with the features as of the end of ``request.end``."""
    from features.feast_repo import materialize as materialize_online

    s = materialize_online(request.workspace, request.end, request.settings)
    return CommandResult(s, text=f"materialized ({s.mode}) up to {s.end}")


def publish(request: PublishRequest) -> CommandResult[MetricsSummary]:
    """Publish a run's metrics; a failed push is reported, never raised (monitoring must not
    fail a retrain)."""
    from ranking.monitoring.publish import publish_request

    if request.failed_step is not None and request.status == "success":
        raise RankerError("--failed-step only goes with --status failed")
    result = publish_request(request)
    text = f"run {result.run_id} ({result.status}): {len(result.samples)} series -> {result.delivery} {result.target}"
    if result.push is not None and not result.push.ok:
        text += f" (push failed: {result.push.error})"
    return CommandResult(result.summary(), text=text)


@dataclass(frozen=True)
class GcRequest:
    """``ranker gc``: what killed writers left (older than ``grace_seconds``), what ``retention``
    lets go (None: leftovers only), then the disk measured and its series delivered."""

    workspace: Workspace
    registry: str  # registry root URL
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    dry_run: bool = False  # list what would go; remove and push nothing
    retention: RetentionPolicy | None = None
    pushgateway: str | None = None  # [metrics] pushgateway ("" none; None: $RANKER_PUSHGATEWAY)
    tracking: TrackingSettings | None = None  # [tracking]: the MLflow runs of what goes, go too


def collect_garbage(request: GcRequest) -> CommandResult[GcSummary]:
    import time

    from ranking.monitoring.delivery import resolve_pushgateway
    from ranking.monitoring.disk import deliver, gc_samples, measure
    from ranking.registry import Registry
    from ranking.registry.janitor import collect_garbage as collect

    ws, reg = request.workspace, Registry(request.registry)
    report = collect(
        ws.root,
        reg,
        grace_seconds=request.grace_seconds,
        dry_run=request.dry_run,
        retention=request.retention,
    )
    usage = measure(ws.root, Path(reg.store.root) if reg.store.local else None)
    delivered = None
    if not request.dry_run:
        pushgateway = resolve_pushgateway(request.pushgateway) if request.pushgateway != "" else None
        delivered = deliver(gc_samples(usage, report, time.time()), pushgateway, ws.metrics)
    tracked = ""
    if not request.dry_run and request.tracking is not None:
        from ranking.registry.retention import EXPIRED_RUN
        from ranking.tracking.outbox import prune
        from ranking.tracking.registry import training_records

        # a run folder that goes takes the MLflow run of its training (the model version stays,
        # as it stays in the registry)
        gone = [Path(r["where"]).name for r in report.removed if r["kind"] == EXPIRED_RUN]
        tracked = prune([rid for name in gone for rid in training_records(name)], [], request.tracking)
    verb = "would remove" if request.dry_run else "removed"
    lines = [f"{verb} {len(report.removed)} leftover(s), {report.bytes_freed / 2**20:.1f} MiB freed"]
    lines += [f"  {verb}: {r['kind']} {r['where']} ({r['bytes'] / 2**20:.1f} MiB)" for r in report.removed]
    lines += [f"  kept: {r['kind']} {r['where']} ({r['why']})" for r in report.kept]
    lines += [f"  failed: {r['kind']} {r['where']} ({r['why']})" for r in report.failed]
    used = ", ".join(f"{kind} {size / 2**20:.1f}" for kind, size in usage.kinds.items())
    lines.append(
        f"disk (MiB): {used}; {usage.free_bytes / max(usage.size_bytes, 1):.0%} of the filesystem free"
    )
    if tracked:
        lines.append(f"MLflow: {tracked}")
    return CommandResult(report.summary(usage, delivered), text="\n".join(lines))


@dataclass
class StepOutcome:
    step: str
    exit_code: int
    summary: dict[str, JsonValue]  # as recorded: the JSON edge (pipeline/<run id>/<step>.json)
    duration_seconds: float
    error: str | None = None
    result: CommandResult[Any] | None = None  # what the step returned (None: it raised)

    def brief(self) -> StepBrief:
        brief = StepBrief(
            step=self.step, exit_code=self.exit_code, duration_seconds=round(self.duration_seconds, 3)
        )
        return brief.model_copy(update={"error": self.error}) if self.error else brief


class InProcessSteps:
    """Runs steps in this process under one pipeline run id and records each outcome: the
    summary of a step that returned, or ``{step, exit_code: 2, error}`` for one that failed with a
    user error (a crash of ours propagates, a traceback and exit 70 for the whole command)."""

    def __init__(self, ws: Workspace, run_id: str) -> None:
        self.ws = ws
        self.run_id = run_id
        self.outcomes: list[StepOutcome] = []

    def run(self, step: str, call: Callable[[], CommandResult[Any]]) -> StepOutcome:
        log.info("ranker run %s: step %s", self.run_id, step)
        killpoints.reached(f"{step}:start")
        started = time.perf_counter()
        try:
            result = call()
        except (RankerError, OSError) as exc:
            user_error = as_user_error(exc)
            if user_error is None:
                raise
            code, message = user_error.exit_code, str(user_error)
            failure = CommandResult(StepError(step=step, exit_code=code, error=message), exit_code=code)
            with contextlib.suppress(OSError):  # the disk that failed the step may refuse this too
                record_summary(self.ws, self.run_id, step, failure)
            return self._done(StepOutcome(step, code, {}, time.perf_counter() - started, error=message))
        summary = record_summary(self.ws, self.run_id, step, result)
        if result.text:
            log.info("%s", result.text)
        elapsed = time.perf_counter() - started
        return self._done(StepOutcome(step, result.exit_code, summary, elapsed, result.failure, result))

    def _done(self, outcome: StepOutcome) -> StepOutcome:
        self.outcomes.append(outcome)
        return outcome
