"""``review.recipe = "auto"``: whether a review switches the daily recipe (pure), and the state
file the config loader layers over the workspace config (``ranking.config.loader.auto_recipe_layer``).

State: ``<home>/reviews/recipe.json`` = ``{recipe, values, review_id, previous, switched_at}`` (the
recipe the daily run trains, its dotted config values and the review that switched to it), written
atomically; every switch is also appended to ``<home>/reviews/history.jsonl``. Every run trained
under it records the values' source as ``review:<review id>:<recipe>`` in its effective config
(``effective_config.json``, which the registry keeps with the version): the lineage of a model
names the review that chose its recipe.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from ranking.config.loader import AUTO_RECIPE_FILE, AUTO_RECIPE_SECTIONS, RawValue, reviewed_recipe_problem
from ranking.core import killpoints
from ranking.core.atomic import atomic_write_json
from ranking.review.rule import ReviewError

OK = "ok"
TOO_FEW_DAYS = "too_few_days"
FAILED = "failed"
HISTORY_FILE = Path("reviews") / "history.jsonl"


class SwitchRecord(TypedDict):
    """A switch: the state file's content and a line of the history."""

    recipe: str
    values: dict[str, RawValue]  # the recipe's dotted config values
    review_id: str
    previous: str | None  # the recipe the daily run trained before (None: the configured [recipe])
    switched_at: str
    reason: str


@dataclass(frozen=True)
class AutoState:
    recipe: str
    review_id: str


@dataclass(frozen=True)
class SwitchDecision:
    switch: bool
    recipe: str | None  # the recipe the daily run trains after this review (None: as configured)
    reason: str


def decide_switch(
    current: AutoState | None, review_id: str, status: str, recommended: str | None, auto: bool
) -> SwitchDecision:
    """At most one switch per review: only an ``ok`` review with ``auto`` on switches, to a
    recipe other than the current one, and never twice for the same review id."""
    running = current.recipe if current else None
    if not auto:
        return SwitchDecision(
            False, running, 'review.recipe = "fixed": the daily run trains [recipe] as configured'
        )
    if status != OK or recommended is None:
        return SwitchDecision(False, running, f"review {review_id} is {status}: the current recipe stays")
    if current is not None and current.review_id == review_id:
        return SwitchDecision(False, running, f"review {review_id} already switched to {running}")
    if recommended == running:
        return SwitchDecision(False, running, f"{running} is already the daily recipe")
    was = running or "the configured [recipe]"
    return SwitchDecision(True, recommended, f"review {review_id} recommends {recommended} (was {was})")


def read_state(home: Path) -> AutoState | None:
    path = home / AUTO_RECIPE_FILE
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ReviewError(f"{path}: cannot read the reviewed recipe: {exc}") from None
    if not isinstance(found, dict) or not all(isinstance(found.get(k), str) for k in ("recipe", "review_id")):
        raise ReviewError(f"{path}: not a reviewed recipe (recipe, review_id, values)")
    problem = reviewed_recipe_problem(found["recipe"], found["review_id"])
    if problem:
        raise ReviewError(f"{path}: {problem}")
    return AutoState(found["recipe"], found["review_id"])


def auto_values(recipe: str, values: Mapping[str, RawValue]) -> dict[str, RawValue]:
    """The recipe's values the daily run may take (what the config loader accepts)."""
    other = sorted(k for k in values if k.split(".")[0] not in AUTO_RECIPE_SECTIONS)
    if other:
        raise ReviewError(
            f'recipe {recipe}: {other[0]}: with review.recipe = "auto" a reviewed recipe may set only'
            f" {', '.join(AUTO_RECIPE_SECTIONS)}"
        )
    return dict(values)


def apply_switch(
    home: Path, decision: SwitchDecision, review_id: str, values: Mapping[str, RawValue], now: dt.datetime
) -> SwitchRecord | None:
    """Append the switch to the history, then write the state; None when the decision keeps.
    In that order: a history that cannot be written leaves no switch behind (the state is what
    the daily run follows), and a state write that fails after it leaves a line the next
    review's switch follows, never a switch the history does not hold."""
    if not decision.switch or decision.recipe is None:
        return None
    recorded = _last_switch(home)
    if recorded is not None and (recorded.get("review_id"), recorded.get("recipe")) == (
        review_id,
        decision.recipe,
    ):
        # a run of this review killed after its history line and before the state: the switch is
        # recorded, only its state is missing (appending it again made two switches of one review)
        record = recorded
    else:
        previous = read_state(home)
        record = {
            "recipe": decision.recipe,
            "values": dict(values),
            "review_id": review_id,
            "previous": previous.recipe if previous else None,
            "switched_at": now.isoformat(),
            "reason": decision.reason,
        }
        append_line(home / HISTORY_FILE, json.dumps(record, sort_keys=True))
    killpoints.reached("review:switch-appended")
    atomic_write_json(home / AUTO_RECIPE_FILE, record)
    killpoints.reached("review:switch-written")
    return record


def _last_switch(home: Path) -> SwitchRecord | None:
    """The last complete line of the switch history (None: no history, or its last line is torn
    or not a record)."""
    try:
        text = (home / HISTORY_FILE).read_text()
    except FileNotFoundError:
        return None
    except ValueError as exc:  # not text; an OSError names its path on its own (exit 2)
        raise ReviewError(f"{home / HISTORY_FILE}: cannot read the switch history: {exc}") from None
    if not text.endswith("\n"):  # a torn last line: a writer killed before its newline
        return None
    lines = text.splitlines()
    try:
        last = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return cast(SwitchRecord, last) if isinstance(last, dict) else None


def append_line(path: Path, line: str) -> None:
    """Append one line durably; after a torn last line (no newline: a killed writer) the new line
    starts on a line of its own instead of merging into it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as out:
        torn = False
        if out.seek(0, os.SEEK_END) > 0:
            out.seek(-1, os.SEEK_END)
            torn = out.read(1) != b"\n"
        out.write((b"\n" if torn else b"") + line.encode() + b"\n")
        out.flush()
        os.fsync(out.fileno())
