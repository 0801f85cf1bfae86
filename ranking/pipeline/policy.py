"""The promotion policy: after the gate, promote the candidate, record its rejection, or keep the
champion — and the reason recorded with it. Pure; `ranker decide` (ranking/pipeline/decide.py)
feeds it from the registry, and both `ranker run` and the Airflow DAG act on its answer.

- a dry run keeps the champion, whatever the gate said;
- a forced promotion (with a reason) promotes, past a failed gate if need be (``force``);
- a failed gate records the rejection;
- a passing gate promotes, except when the champion was already trained for this window end: one
  promotion per date, so a rerun of a date that already promoted keeps the champion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# the branches, named as the DAG tasks that carry them out
PROMOTE, RECORD_REJECTION, KEEP_CHAMPION = "promote", "record_rejection", "keep_champion"
BRANCHES = (PROMOTE, RECORD_REJECTION, KEEP_CHAMPION)


@dataclass(frozen=True)
class Decision:
    branch: str  # one of BRANCHES
    reason: str  # recorded in the registry with a promotion or rejection; says why for a kept champion
    force: bool  # promote past a failed gate (`ranker promote --force`)


def request_problem(*, dry_run: bool, force_promote: bool, reason: str | None) -> str | None:
    """Why a run's promotion flags cannot be honoured (None when they can)."""
    if force_promote and not (reason and reason.strip()):
        return "--force-promote needs --reason TEXT (it is recorded in the champion's history)"
    if force_promote and dry_run:
        return "--force-promote and --dry-run contradict each other"
    return None


def _run_tag(run_id: str | None) -> str:
    return f" (run {run_id})" if run_id else ""


def _failed(failed_checks: Sequence[str]) -> str:
    return ", ".join(failed_checks) or "unknown checks"


def decide(
    *,
    gate_decision: str | None,
    failed_checks: Sequence[str],
    end: str,
    champion_trained_for: str | None,
    dry_run: bool = False,
    force_promote: bool = False,
    reason: str | None = None,
    run_id: str | None = None,
) -> Decision:
    """Which branch follows the gate for a candidate whose window ends (= eval day) on ``end``."""
    passed = gate_decision == "pass"
    passed_reason = f"gate passed for window ending {end}{_run_tag(run_id)}" + (
        f"; {reason}" if reason else ""
    )
    if dry_run:
        return Decision(KEEP_CHAMPION, "dry run: the champion is left as it is", force=False)
    if force_promote:
        if passed:
            return Decision(PROMOTE, passed_reason, force=False)
        return Decision(
            PROMOTE, f"forced past failed gate checks [{_failed(failed_checks)}]: {reason}", force=True
        )
    if not passed:
        return Decision(
            RECORD_REJECTION,
            f"gate rejected for window ending {end}{_run_tag(run_id)}: {_failed(failed_checks)}",
            force=False,
        )
    if champion_trained_for == end:
        return Decision(
            KEEP_CHAMPION,
            f"the champion was already trained for {end}: one promotion per window end",
            force=False,
        )
    return Decision(PROMOTE, passed_reason, force=False)
