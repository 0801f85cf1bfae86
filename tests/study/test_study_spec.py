"""The study's plan: schedules from the trainer's one table, one run per cell, warm-start bases,
and specs that cannot be compared are refused."""

from __future__ import annotations

import datetime as dt

import pytest
from study_fixtures import END

from ranking.study.spec import Cell, StudyError, StudySpec, letters, plan_cells
from ranking.trainer.schedule import NAMED_SCHEDULES

# The table the study kept for itself before it used the trainer's (first epoch, every later epoch).
STUDY_TABLE = {
    "delayed": ("F", "J"),
    "joint": ("J", "J"),
    "frozen": ("F", "F"),
    "joint_then_frozen": ("J", "F"),
}


def test_schedule_letters_are_prefix_consistent() -> None:
    assert letters("delayed", 4) == "F,J,J,J"
    assert letters("joint_then_frozen", 3) == "J,F,F"
    assert letters("frozen", 1) == "F"
    # the e-epoch run is the first e epochs of the longest run: one run per cell is enough
    assert letters("delayed", 4).startswith(letters("delayed", 2))


def test_plan_has_one_run_per_cell_and_one_warm_base_per_window_and_seed() -> None:
    spec = StudySpec(end=END, windows=(10, 20), schedules=("joint", "delayed"), seeds=3)
    bases, cells = plan_cells(spec)
    assert len(bases) == 2 * 3 and all(b.init == "base" and b.schedule == "joint" for b in bases)
    assert len(cells) == 2 * 2 * 2 * 3  # inits x windows x schedules x seeds
    assert len({c.key for c in cells + bases}) == len(cells) + len(bases)
    scratch_only = StudySpec(end=END, inits=("scratch",), seeds=1)
    assert plan_cells(scratch_only)[0] == []  # no warm start needed
    assert spec.warm_end(20) == END - dt.timedelta(days=20)  # preceding, disjoint window
    assert StudySpec(end=END, warm_offset_days=1).warm_end(20) == END - dt.timedelta(days=1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"schedules": ("delayed",)}, "baseline"),
        ({"epochs": (2, 3)}, "baseline"),
        ({"schedules": ("joint", "sometimes")}, "unknown schedules"),
        ({"inits": ("pretrained",)}, "inits"),
        ({"seeds": 0}, "seeds"),
    ],
)
def test_spec_rejects_what_cannot_be_compared(kwargs: dict, message: str) -> None:
    with pytest.raises(StudyError, match=message):
        StudySpec(end=END, **kwargs)


def test_the_trainers_schedule_table_gives_the_letters_the_study_always_used() -> None:
    names = set(StudySpec(end=END).schedules) | set(NAMED_SCHEDULES)
    assert names == set(STUDY_TABLE)  # every name a study may use, and no other
    for name in sorted(names):
        first, rest = STUDY_TABLE[name]
        for epochs in range(1, 7):
            assert letters(name, epochs) == ",".join([first] + [rest] * (epochs - 1)), (name, epochs)


def test_a_base_cell_and_a_study_cell_never_share_a_folder() -> None:
    base = Cell(20, "joint", 0, "base")
    assert {base.key, Cell(20, "joint", 0, "scratch").key, Cell(20, "joint", 0, "warm").key} == {
        "base-w20-joint-s0",
        "scratch-w20-joint-s0",
        "warm-w20-joint-s0",
    }
    assert StudySpec(end=END, epochs=(1, 3)).max_epochs == 3
    assert StudySpec(end=END).to_dict()["end"] == "2026-01-08"
