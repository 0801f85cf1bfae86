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
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ranking.core import killpoints
from ranking.core.errors import RankerError, as_user_error
from ranking.core.results import CommandResult, record_summary
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from features.validation.step import ValidationRequest
    from features.window import WindowRequest
    from ranking.gate.run import GateRequest
    from ranking.monitoring.publish import PublishRequest
    from ranking.registry.operations import PromoteRequest, RejectRequest
    from ranking.trainer.job import TrainJob

log = logging.getLogger(__name__)


def window(request: WindowRequest) -> CommandResult:
    from features.window import window_step

    s = window_step(request)
    repaired = (
        f" ({len(s['days_repaired'])} rebuilt: no longer matched their record)" if s["days_repaired"] else ""
    )
    text = (
        f"window {s['end']} ({s['days']}d): {s['rows_train']:,} train rows, {s['rows_eval']:,} eval rows,"
        f" {s['days_built']} days built, {s['days_reused']} reused{repaired} -> {s['manifest']}"
    )
    return CommandResult(s, text=text)


def validate(request: ValidationRequest) -> CommandResult:
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
    body = s.body()
    if s.verdict == "fail":
        body["error"] = failure_line(s)
        return CommandResult(body, exit_code=2, text="\n".join(lines))
    return CommandResult(body, text="\n".join(lines))


def train(job: TrainJob) -> CommandResult:
    from ranking.trainer.job import run_train_job

    summary = run_train_job(job)
    if summary is None:  # a non-zero rank, or a worker whose launcher reports
        return CommandResult(quiet=True)
    return CommandResult(summary=summary, text=train_text(summary))


def train_text(s: dict[str, Any]) -> str:
    lines = [f"run {s['run_dir']}  schedule {s['schedule']}  pipeline {s['pipeline']}  seed {s['seed']}"]
    for e in s["epochs"]:
        ev = e.get("eval") or {}
        lines.append(
            f"  epoch {e['epoch']} [{e['phase']:6}] loss {e['loss']:.4f}  {e['samples_per_second']:,.0f} samples/s"
            f"  lookup {e['lookup_ratio']:.1%} (exposed {e['exposed_lookup_ratio']:.1%})"
            + (f"  HIT@3 {ev['save_hit_at_3']:.4f} AUC {ev['auc']:.4f}" if ev else "")
        )
    ev = s["eval"]
    lines.append(f"eval: save HIT@3 {ev['save_hit_at_3']:.4f}  AUC {ev['auc']:.4f}  NE {ev['ne']:.4f}")
    if s.get("version"):
        lines.append(f"registered as {s['version']}")
    return "\n".join(lines)


def gate(request: GateRequest) -> CommandResult:
    """Exit 0 when the candidate passes, 1 when the gate rejects it."""
    from ranking.gate.run import gate_candidate

    result = gate_candidate(request)
    s = result.summary
    champion = (s.get("champion") or {}).get("version")
    lines = [
        f"gate {s['decision']}: {s['candidate']['version']} vs "
        f"{champion or 'no champion (first run)'} on {s['eval_date']}"
    ]
    lines += [f"  [{'ok' if c['passed'] else 'FAIL'}] {c['name']}: {c['detail']}" for c in s["checks"]]
    return CommandResult(s, exit_code=0 if result.passed else 1, text="\n".join(lines))


def promote(request: PromoteRequest) -> CommandResult:
    from ranking.registry.operations import promote as promote_version

    summary = promote_version(request)
    if summary["noop"]:
        text = f"{summary['version']} already is the champion; nothing changed"
    else:
        text = f"champion: {summary['previous'] or '(none)'} -> {summary['version']}" + (
            " (forced)" if summary["forced"] else ""
        )
    return CommandResult(summary, text=text)


def reject(request: RejectRequest) -> CommandResult:
    from ranking.registry.operations import reject as reject_version

    summary = reject_version(request)
    return CommandResult(summary, text=f"recorded rejection of {summary['version']}: {summary['reason']}")


def publish(request: PublishRequest) -> CommandResult:
    """Publish a run's metrics; a failed push is reported, never raised (monitoring must not
    fail a retrain)."""
    from ranking.monitoring.publish import publish_request

    if request.failed_step is not None and request.status == "success":
        raise RankerError("--failed-step only goes with --status failed")
    result = publish_request(request)
    text = f"run {result.run_id} ({result.status}): {len(result.samples)} series -> {result.delivery} {result.target}"
    if result.push is not None and not result.push.ok:
        text += f" (push failed: {result.push.error})"
    return CommandResult(summary=result.summary(), text=text)


@dataclass
class StepOutcome:
    step: str
    exit_code: int
    summary: dict[str, Any]
    duration_seconds: float
    error: str | None = None

    def brief(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "exit_code": self.exit_code,
            "duration_seconds": round(self.duration_seconds, 3),
        }
        if self.error:
            out["error"] = self.error
        return out


class InProcessSteps:
    """Runs steps in this process under one pipeline run id and records each outcome: the
    summary of a step that returned, or ``{step, exit_code: 2, error}`` for one that failed with a
    user error (a crash of ours propagates, a traceback and exit 70 for the whole command)."""

    def __init__(self, ws: Workspace, run_id: str) -> None:
        self.ws = ws
        self.run_id = run_id
        self.outcomes: list[StepOutcome] = []

    def run(self, step: str, call: Callable[[], CommandResult]) -> StepOutcome:
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
            failure = CommandResult({"error": message}, exit_code=code)
            with contextlib.suppress(OSError):  # the disk that failed the step may refuse this too
                record_summary(self.ws, self.run_id, step, failure)
            return self._done(StepOutcome(step, code, {}, time.perf_counter() - started, error=message))
        summary = record_summary(self.ws, self.run_id, step, result)
        if result.text:
            log.info("%s", result.text)
        error = str(summary["error"]) if result.exit_code >= 2 and summary.get("error") else None
        return self._done(StepOutcome(step, result.exit_code, summary, time.perf_counter() - started, error))

    def _done(self, outcome: StepOutcome) -> StepOutcome:
        self.outcomes.append(outcome)
        return outcome
