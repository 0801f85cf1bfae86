"""What a step returns: its summary model (written to ``<home>/pipeline/<run id>/<step>.json``),
its exit code and the text a person reads. The CLI's handlers and the in-process steps of
``ranker run`` return the same type; the summary is turned into JSON only at the edge
(:meth:`CommandResult.body`: the ``--json`` line and the recorded step summary)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, JsonValue

from ranking.core import killpoints

if TYPE_CHECKING:
    from ranking.core.workspace import Workspace

# the step's summary model; a command that is not a step of the pipeline (config show, features
# accept, study) may hand over the JSON object it prints instead
Body = TypeVar("Body", bound="BaseModel | dict[str, JsonValue]")


@dataclass
class CommandResult(Generic[Body]):
    summary: Body | None = None  # None: nothing to say (a quiet result, or a failure's error only)
    exit_code: int = 0
    text: str | None = None  # human-readable output when --json is not given
    quiet: bool = False  # print and record nothing (e.g. non-zero ranks of a torchrun job)
    error: str | None = None  # why the step failed (exit 2), when its summary does not say

    def body(self) -> dict[str, JsonValue]:  # the JSON edge: what is printed and recorded
        """The summary as JSON-ready data: the fields the producer set (a model's unset defaults
        are left out, as its schema documents), plus ``error`` when the result carries one."""
        out: dict[str, JsonValue] = {}
        if isinstance(self.summary, BaseModel):
            out = self.summary.model_dump(mode="json", exclude_unset=True)
        elif self.summary is not None:
            out = dict(self.summary)
        if self.error is not None:
            out.setdefault("error", self.error)
        return out

    @property
    def failure(self) -> str | None:
        """The one line a failed step (exit 2 or more) gives for why, if it gives one."""
        if self.exit_code < 2:
            return None
        if self.error is not None:
            return self.error
        error = (
            self.summary.get("error")
            if isinstance(self.summary, dict)
            else getattr(self.summary, "error", None)
        )
        return str(error) if error else None


def record_summary(
    ws: Workspace, run_id: str | None, step: str, result: CommandResult[Any]
) -> dict[str, JsonValue]:
    """The step summary as it is recorded (``step``, ``exit_code`` and ``run_id`` filled in), written
    atomically to ``<home>/pipeline/<run id>/<step>.json`` when there is a run id."""
    from ranking.core.atomic import atomic_write_json

    summary = result.body()
    summary.setdefault("step", step)
    summary.setdefault("exit_code", result.exit_code)
    killpoints.reached(f"{step}:returned")
    if run_id:
        summary.setdefault("run_id", run_id)
        atomic_write_json(ws.step_summary_path(run_id, step), summary)
    killpoints.reached(f"{step}:recorded")
    return summary
