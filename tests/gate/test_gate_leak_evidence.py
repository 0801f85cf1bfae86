"""The gate's evidence for a large lift (issue 30): the lineage of warm starts, followed back to a
model trained from scratch, and the window's recorded data validation."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from ranking.core.errors import RegistryError
from ranking.gate.run import _lineage, leak_evidence

EVAL = dt.date(2026, 3, 1)


@dataclass
class Record:
    train: dict[str, Any] = field(default_factory=dict)


class Registry:
    """What the evidence reads of the registry: each version's training record."""

    def __init__(self, records: dict[str, dict[str, Any]]) -> None:
        self.records = records

    def record(self, version: str) -> Record:
        if version not in self.records:
            raise RegistryError(f"unknown version {version}")
        return Record(self.records[version])


def trained(start: str, end: str, source: str = "none", parent: str | None = None) -> dict[str, Any]:
    return {
        "train_start": start,
        "train_end": end,
        "warm_start": {"source": source},
        "lineage": {"parent": parent} if parent else {},
    }


REGISTRY = Registry(
    {
        "v1": trained("2026-01-20", "2026-02-09"),  # the base: from scratch, before the window
        "v2": trained("2026-02-09", "2026-03-01", "base v1"),  # yesterday's champion
        "v9": trained("2026-02-10", "2026-03-02"),  # trained on the eval day
        "v8": trained("2026-02-09", "2026-03-01", "base v9"),
        "v7": {"warm_start": {"source": "base v1"}},  # no window recorded
    }
)


@pytest.mark.parametrize(
    ("candidate", "known", "clean", "says"),
    [
        (trained("2026-02-09", "2026-03-01"), True, True, None),
        (trained("2026-02-09", "2026-03-01", "base (none yet: from scratch)"), True, True, None),
        (trained("2026-02-09", "2026-03-01", "champion v2"), True, True, None),
        (trained("2026-02-09", "2026-03-01", "champion v8"), True, False, "v9 trained on"),
        (trained("2026-02-09", "2026-03-01", "base v9"), True, False, "v9 trained on"),
        (trained("2026-02-09", "2026-03-01", "path"), False, False, "not a registry version"),
        (trained("2026-02-09", "2026-03-01", "champion v404"), False, False, "cannot be read"),
        (
            trained("2026-02-09", "2026-03-01", "champion v7"),
            False,
            False,
            "does not record its training window",
        ),
        (trained("2026-02-28", "2026-03-01", "champion v2", parent="v2"), True, True, None),
    ],
)
def test_the_lineage_is_followed_back_to_a_model_trained_from_scratch(
    candidate: dict[str, Any], known: bool, clean: bool, says: str | None
) -> None:
    found = _lineage(REGISTRY, candidate, EVAL)  # type: ignore[arg-type]
    assert (found.known, found.clean) == (known, clean)
    assert (found.why is None) if says is None else (says in (found.why or ""))


def test_the_evidence_reads_the_recorded_validation_and_a_review_switch() -> None:
    validation = {
        "verdict": "pass", "window_id": "w", "leak_checked": True, "leak_clean": True,
        "counts": {"fail": 0, "warn": 0, "accepted": 0}, "accepted": [], "report": "r.md",
    }  # fmt: skip
    base = trained("2026-02-09", "2026-03-01", "base v1")
    cleared = leak_evidence(REGISTRY, Record({**base, "data_validation": validation}), "v2", EVAL)  # type: ignore[arg-type]
    assert cleared.cleared and cleared.data_checked and cleared.lineage_clean
    unvalidated = leak_evidence(REGISTRY, Record(base), "v2", EVAL)  # type: ignore[arg-type]
    assert not unvalidated.cleared and "did not run" in unvalidated.why_not()
    leaky = {**validation, "leak_clean": False}
    assert not leak_evidence(REGISTRY, Record({**base, "data_validation": leaky}), "v2", EVAL).cleared  # type: ignore[arg-type]
    switched = {**base, "recipe_source": "review:r7:default"}
    first = leak_evidence(REGISTRY, Record(switched), "v2", EVAL)  # type: ignore[arg-type]
    assert first.review_switch == "review:r7:default" and first.cleared
    # the champion already runs the reviewed recipe: not a switch any more
    REGISTRY.records["v3"] = {**trained("2026-02-08", "2026-02-28"), "recipe_source": "review:r7:default"}
    assert leak_evidence(REGISTRY, Record(switched), "v3", EVAL).review_switch is None  # type: ignore[arg-type]
