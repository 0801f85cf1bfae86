"""`ranker decide`: the promotion policy (ranking/pipeline/policy.py) applied to a candidate's gate
verdict and the current champion, both read from the registry. `ranker run` and the DAG's
``decide`` branch act on its answer; neither decides by itself."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ranking.core.errors import RankerError, RegistryError
from ranking.core.summaries import DecideSummary
from ranking.pipeline.policy import decide, request_problem
from ranking.registry import Registry


@dataclass(frozen=True)
class DecideRequest:
    registry: str  # registry root URL
    candidate: str
    end: dt.date  # the window end (= eval day) the candidate was trained and gated for
    dry_run: bool = False
    force_promote: bool = False
    reason: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        problem = request_problem(dry_run=self.dry_run, force_promote=self.force_promote, reason=self.reason)
        if problem:
            raise RankerError(problem)


def decide_candidate(req: DecideRequest) -> DecideSummary:
    """The `decide` step summary: ``branch`` (promote | record_rejection | keep_champion),
    ``reason``, ``force``, and what they were decided on."""
    reg = Registry(req.registry)
    end = req.end.isoformat()
    reg.record(req.candidate)  # an unknown or incomplete version is named as such
    verdict = reg.verdict(req.candidate)
    if verdict is None or verdict.decision is None:
        raise RegistryError(
            f"{req.candidate} has not been through the gate: run `ranker gate --candidate {req.candidate} "
            f"--end {end}` first"
        )
    if verdict.eval_date != end:
        raise RegistryError(
            f"the gate verdict of {req.candidate} is for eval day {verdict.eval_date}, not {end}: "
            f"run `ranker gate --candidate {req.candidate} --end {end}`"
        )
    champion = reg.champion()
    trained_for = reg.trained_for(champion) if champion else None
    decision = decide(
        gate_decision=verdict.decision,
        failed_checks=verdict.failed_checks,
        end=end,
        champion_trained_for=trained_for,
        dry_run=req.dry_run,
        force_promote=req.force_promote,
        reason=req.reason.strip() if req.reason else None,
        run_id=req.run_id,
    )
    return DecideSummary.model_validate(
        {
            "branch": decision.branch,
            "reason": decision.reason,
            "force": decision.force,
            "version": req.candidate,
            "end": end,
            "decision": verdict.decision,
            "failed_checks": verdict.failed_checks,
            "champion": champion,
            "champion_trained_for": trained_for,
            "dry_run": req.dry_run,
            "force_promote": req.force_promote,
        }
    )
