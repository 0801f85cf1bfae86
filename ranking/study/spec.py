"""What a schedule study trains: the spec (windows, epochs, schedules, seeds, inits), its cells and
where it is written. One training run per cell covers every epoch count: the schedules are
prefix-consistent (the first two epochs of ``delayed`` at 4 epochs are ``delayed`` at 2 epochs,
and the learning rate does not depend on the epoch count)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace, validate_run_id
from ranking.trainer.models.config import TrainConfig
from ranking.trainer.schedule import NAMED_SCHEDULES, resolve_schedule, schedule_letters

INITS = ("scratch", "warm", "warm_dense")  # warm_dense: warm dense layers, fresh tables
WARM_INITS = ("warm", "warm_dense")
BASELINE_SCHEDULE = "joint"  # the 1-epoch joint model is the baseline of every comparison


class StudyError(RankerError):
    """A study could not be planned or one of its runs failed."""


class StudySpecRecord(TypedDict):
    """A study's spec as study.json records it (the eval day as ISO text)."""

    end: str
    windows: tuple[int, ...]
    epochs: tuple[int, ...]
    schedules: tuple[str, ...]
    seeds: int
    inits: tuple[str, ...]
    warm_offset_days: int | None
    pipeline: str
    batch_size: int
    model_config: str | None


@dataclass(frozen=True)
class StudySpec:
    end: dt.date
    windows: tuple[int, ...] = (10, 20)
    epochs: tuple[int, ...] = (1, 2, 3, 4)
    schedules: tuple[str, ...] = ("joint", "frozen", "delayed", "joint_then_frozen")
    seeds: int = 3
    inits: tuple[str, ...] = ("scratch", "warm")
    # warm start = a 1-epoch joint model trained on the window that ends this many days before
    # ``end`` (default: the window's own length, i.e. the preceding, disjoint window)
    warm_offset_days: int | None = None
    pipeline: str = TrainConfig.pipeline
    batch_size: int = TrainConfig.batch_size
    model_config: str | None = None  # path to a ModelConfig JSON/YAML

    def __post_init__(self) -> None:
        if not self.windows or min(self.windows) <= 0:
            raise StudyError("windows must be positive day counts")
        if not self.epochs or min(self.epochs) <= 0:
            raise StudyError("epochs must be positive")
        unknown = [s for s in self.schedules if s not in NAMED_SCHEDULES]
        if unknown:
            raise StudyError(f"unknown schedules {unknown}: choose from {', '.join(NAMED_SCHEDULES)}")
        if BASELINE_SCHEDULE not in self.schedules or 1 not in self.epochs:
            raise StudyError("the study needs the 1-epoch joint baseline: keep 'joint' and epoch 1")
        if self.seeds <= 0:
            raise StudyError("seeds must be > 0")
        bad_inits = [i for i in self.inits if i not in INITS]
        if not self.inits or bad_inits:
            raise StudyError(f"inits must be a non-empty subset of {INITS}, got {self.inits}")
        if self.warm_offset_days is not None and self.warm_offset_days <= 0:
            raise StudyError("warm_offset_days must be > 0")

    @property
    def max_epochs(self) -> int:
        return max(self.epochs)

    def warm_end(self, window_days: int) -> dt.date:
        return self.end - dt.timedelta(days=self.warm_offset_days or window_days)

    def to_dict(self) -> StudySpecRecord:
        """The spec as study.json records it."""
        return {
            "end": self.end.isoformat(),
            "windows": self.windows,
            "epochs": self.epochs,
            "schedules": self.schedules,
            "seeds": self.seeds,
            "inits": self.inits,
            "warm_offset_days": self.warm_offset_days,
            "pipeline": self.pipeline,
            "batch_size": self.batch_size,
            "model_config": self.model_config,
        }


@dataclass(frozen=True)
class Cell:
    """One training run of the study (evaluated after every epoch)."""

    window_days: int
    schedule: str
    seed: int
    init: str  # "scratch" | "warm" | "warm_dense" | "base" (the warm-start model itself)

    @property
    def key(self) -> str:
        return f"{self.init}-w{self.window_days}-{self.schedule}-s{self.seed}"


def letters(schedule: str, epochs: int) -> str:
    """A named schedule over ``epochs`` epochs as ``ranker train --schedule`` takes it ("F,J,J")."""
    return schedule_letters(resolve_schedule(schedule, epochs))


def plan_cells(spec: StudySpec) -> tuple[list[Cell], list[Cell]]:
    """(warm-start base runs, study cells). Bases run first: warm cells start from them."""
    bases = [
        Cell(w, BASELINE_SCHEDULE, seed, "base")
        for w in spec.windows
        for seed in range(spec.seeds)
        if set(WARM_INITS) & set(spec.inits)
    ]
    cells = [
        Cell(w, schedule, seed, init)
        for init in spec.inits
        for w in spec.windows
        for schedule in spec.schedules
        for seed in range(spec.seeds)
    ]
    return bases, cells


def study_dir_for(ws: Workspace, spec: StudySpec, name: str | None = None) -> Path:
    return ws.studies / validate_run_id(name or f"study-{spec.end.isoformat()}")
