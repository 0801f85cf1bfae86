"""``ranker metrics publish`` and ``ranker metrics show``: a run's summaries folded into the state,
turned into samples and delivered (Pushgateway, else textfile), under the workspace's state lock.

The layers: :mod:`runs` (I/O: summaries → run record), :mod:`state` and :mod:`samples` (pure
folding and mapping), :mod:`exposition` and :mod:`delivery` (the edge). A failed push never fails
the publish: it is counted and the textfile is written instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ranking.core.errors import RankerError
from ranking.core.summaries import MetricsSummary
from ranking.core.workspace import Workspace
from ranking.monitoring.delivery import (
    DEFAULT_JOB,
    PushConfig,
    PushResult,
    push_with_retries,
    resolve_pushgateway,
    textfile_path,
    validate_job,
    write_textfile,
)
from ranking.monitoring.exposition import parse_exposition, render
from ranking.monitoring.runs import load_run
from ranking.monitoring.samples import Sample, build_samples
from ranking.monitoring.state import (
    PublishRecord,
    advance_state,
    load_state,
    save_state,
    state_lock,
    state_path,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishRequest:
    """What ``ranker metrics publish`` asks for."""

    workspace: Workspace
    run_id: str
    status: str | None = None  # None: decided from the run's summaries and failure records
    failed_step: str | None = None
    pushgateway: str | None = None  # None: $RANKER_PUSHGATEWAY_URL; "": no Pushgateway
    job: str | None = None  # None: DEFAULT_JOB
    push_attempts: int = 3
    textfile: Path | None = None  # None: <home>/metrics/ranker.prom


@dataclass(frozen=True)
class PublishResult:
    run_id: str
    status: str
    failed_step: str | None
    delivery: str  # pushgateway | textfile
    target: str
    push: PushResult | None
    samples: list[Sample]
    steps: list[str]

    def summary(self) -> MetricsSummary:
        # status and delivery are checked against the summary's literals here, where it is made
        return MetricsSummary.model_validate(
            {
                "run_id": self.run_id,
                "status": self.status,
                "failed_step": self.failed_step,
                "delivery": self.delivery,
                "target": self.target,
                "push_ok": None if self.push is None else self.push.ok,
                "push_attempts": None if self.push is None else self.push.attempts,
                "push_error": None if self.push is None else self.push.error,
                "steps": self.steps,
                "series": len(self.samples),
            }
        )


def publish_request(request: PublishRequest) -> PublishResult:
    """Resolve the request's Pushgateway (flag, else environment) and job, then :func:`publish`."""
    url = resolve_pushgateway(request.pushgateway)
    push = None
    if url is not None:
        push = PushConfig(url=url, job=request.job or DEFAULT_JOB, attempts=request.push_attempts)
    elif request.job is not None:
        validate_job(request.job)
    return publish(
        request.workspace,
        request.run_id,
        status=request.status,
        failed_step=request.failed_step,
        push=push,
        textfile=request.textfile,
    )


def publish(
    ws: Workspace,
    run_id: str,
    *,
    status: str | None = None,
    failed_step: str | None = None,
    push: PushConfig | None = None,
    textfile: Path | None = None,
    now: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PublishResult:
    """Turn a run's summaries into metrics and deliver them (Pushgateway, else textfile)."""
    run = load_run(ws, run_id, status=status, failed_step=failed_step)
    now = time.time() if now is None else now
    target_file = textfile or textfile_path(ws)
    with state_lock(ws):
        state = advance_state(load_state(ws), run, now)
        samples = build_samples(run, state, now)
        push_result = None
        delivery, target = "textfile", str(target_file)
        if push is not None:
            push_result = push_with_retries(samples, push, sleep=sleep)
            if push_result.ok:
                delivery, target = "pushgateway", f"{push.url} job={push.job}"
            else:
                log.error(
                    "metrics push failed after %d attempts (%s); falling back to %s",
                    push_result.attempts,
                    push_result.error,
                    target_file,
                )
                state.push_failures_total += 1
                samples = build_samples(run, state, now)
        exposition = render(samples)
        if delivery == "textfile":
            write_textfile(target_file, exposition)
        state.last_publish = PublishRecord(
            run_id=run.run_id, timestamp=now, delivery=delivery, target=target, exposition=exposition
        )
        save_state(ws, state)
    return PublishResult(
        run_id=run.run_id,
        status=run.status,
        failed_step=run.failed_step,
        delivery=delivery,
        target=target,
        push=push_result,
        samples=samples,
        steps=sorted(run.summaries),
    )


@dataclass(frozen=True)
class ShowRequest:
    """What ``ranker metrics show`` asks for."""

    workspace: Workspace
    # how the workspace was chosen (--home, $RANKER_HOME or the default): named when it holds nothing
    origin: str = "--home"


class ShownPublish(BaseModel):
    """``ranker metrics show``'s summary: what the last publish recorded, with its series parsed
    back (fields are set as the state holds them)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    run_id: str | None = None
    timestamp: float | None = None
    delivery: str | None = None
    target: str | None = None
    series: dict[str, float]  # the exposition's samples, by name{labels}


@dataclass(frozen=True)
class LastPublish:
    summary: ShownPublish
    exposition: str  # the text it delivered


def show(request: ShowRequest) -> LastPublish:
    """The metrics of the last publish in the workspace, as delivered."""
    ws = request.workspace
    last = load_state(ws).last_publish
    if not last:
        raise RankerError(
            f"no metrics published yet in workspace {ws.root} (looked for {state_path(ws)}; the workspace "
            f"is {request.origin}): set --home or $RANKER_HOME to the workspace the pipeline publishes "
            "from (the local stack's: `source var/stack/env.sh`), or publish a run with "
            "`ranker metrics publish --run-id R`"
        )
    exposition = str(last.get("exposition", ""))
    recorded = {k: v for k, v in last.items() if k != "exposition"}
    return LastPublish(
        ShownPublish.model_validate({**recorded, "series": parse_exposition(exposition)}), exposition
    )
