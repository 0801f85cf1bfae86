"""What a step returns: its summary (written to ``<home>/pipeline/<run id>/<step>.json``), its
exit code and the text a person reads. The CLI's handlers and the in-process steps of ``ranker
run`` return the same type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ranking.core import killpoints

if TYPE_CHECKING:
    from ranking.core.workspace import Workspace


@dataclass
class CommandResult:
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0
    text: str | None = None  # human-readable output when --json is not given
    quiet: bool = False  # print and record nothing (e.g. non-zero ranks of a torchrun job)


def record_summary(ws: Workspace, run_id: str | None, step: str, result: CommandResult) -> dict[str, Any]:
    """The step summary as it is recorded (``step``, ``exit_code`` and ``run_id`` filled in), written
    atomically to ``<home>/pipeline/<run id>/<step>.json`` when there is a run id."""
    from ranking.core.atomic import atomic_write_json

    summary = dict(result.summary)
    summary.setdefault("step", step)
    summary.setdefault("exit_code", result.exit_code)
    killpoints.reached(f"{step}:returned")
    if run_id:
        summary.setdefault("run_id", run_id)
        atomic_write_json(ws.step_summary_path(run_id, step), summary)
    killpoints.reached(f"{step}:recorded")
    return summary
