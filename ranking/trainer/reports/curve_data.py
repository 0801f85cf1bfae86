"""The per-step training curve: ``training_curve.json`` in the trainer's run folder, beside curve.png.

A point is the train loss averaged over the steps since the previous point (``every_steps`` of
them, fewer at an epoch's end: every epoch ends on a point), weighted by each step's rows, so it
is the same quantity as an epoch's loss, over a shorter span, not one noisy batch. Under several
ranks each step's loss is the global batch's (the ranks' shares all-reduced, as the epoch losses
are), so every rank holds the same curve; rank 0 writes it. ``step`` and ``samples`` count from
the run's start, across epochs; a resumed run keeps the points of the epochs it continues after.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from ranking.core.atomic import atomic_write_json, read_json
from ranking.core.errors import RankerError
from ranking.core.summaries import Summary

log = logging.getLogger(__name__)

TRAINING_CURVE_FILE = "training_curve.json"  # in the trainer's run_dir, beside curve.png

# points per epoch a run aims at: a default run (2 epochs) gets ~100, a 10-epoch one ~500 at most
POINTS_PER_EPOCH = 50


class CurvePoint(Summary):
    """The train loss at one step of a run."""

    step: int = Field(ge=1)
    """the run's global steps done so far (counted across epochs)"""
    epoch: int = Field(ge=1)
    phase: Literal["F", "J"]
    """F: embedding tables frozen; J: tables and dense tower trained jointly"""
    loss: float
    """mean train loss (BCE) over the steps since the previous point, weighted by rows"""
    samples: int = Field(ge=0)
    """training rows seen so far (all ranks, across epochs)"""


class TrainingCurve(Summary):
    """A run's per-step train loss."""

    points: list[CurvePoint]
    every_steps: int = Field(ge=1)
    """steps between points (an epoch's last point may cover fewer)"""


def every_steps_for(steps_per_epoch: int, points_per_epoch: int = POINTS_PER_EPOCH) -> int:
    """Steps between points so that an epoch gives about ``points_per_epoch`` of them."""
    return max(1, math.ceil(steps_per_epoch / points_per_epoch))


def read_training_curve(run_dir: Path) -> TrainingCurve | None:
    """The run folder's curve; None when the file is absent (a run trained before it was written).
    A file that is not a curve raises :class:`RankerError` naming it."""
    path = Path(run_dir) / TRAINING_CURVE_FILE
    if not path.exists():
        return None
    try:
        return TrainingCurve.model_validate(read_json(path))
    except (ValueError, ValidationError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RankerError(f"{path} is not a training curve: {first}") from exc


def write_training_curve(run_dir: Path, curve: TrainingCurve) -> Path:
    """Write ``curve`` atomically as the run folder's ``training_curve.json``; returns its path."""
    path = Path(run_dir) / TRAINING_CURVE_FILE
    atomic_write_json(path, curve.model_dump(mode="json"))
    return path


class CurveRecorder:
    """Builds a run's curve from the steps' losses as they reach the host (no sync of its own):
    :meth:`add` per step, :meth:`end_epoch` after an epoch's last step."""

    def __init__(self, every_steps: int, earlier: list[CurvePoint] | None = None) -> None:
        self.every_steps = every_steps
        self.points: list[CurvePoint] = list(earlier or [])
        self.step = self.points[-1].step if self.points else 0
        self.samples = self.points[-1].samples if self.points else 0
        self._loss_rows = 0.0
        self._rows = 0
        self._steps = 0
        self._epoch = 0
        self._phase: Literal["F", "J"] = "J"

    @classmethod
    def resumed(
        cls, run_dir: Path, after_epoch: int, steps: int, samples: int, every_steps: int
    ) -> CurveRecorder:
        """A recorder continuing a run resumed after ``after_epoch`` (which had run ``steps`` steps
        over ``samples`` rows): the file's points of those epochs kept, later ones (written before a
        crash, past the checkpoint) dropped. Without a readable file the curve restarts there."""
        try:
            curve = read_training_curve(run_dir)
        except RankerError as exc:
            log.warning("%s; the curve keeps only the epochs trained from now on", exc)
            curve = None
        if curve is None:
            recorder = cls(every_steps)
            recorder.step, recorder.samples = steps, samples
            return recorder
        kept = [p for p in curve.points if p.epoch <= after_epoch]
        recorder = cls(curve.every_steps, kept)
        recorder.step, recorder.samples = steps, samples
        return recorder

    def start_epoch(self, epoch: int, phase: str) -> None:
        self._epoch = epoch
        self._phase = "F" if phase in ("frozen", "F") else "J"
        self._loss_rows, self._rows, self._steps = 0.0, 0, 0

    def add(self, loss: float, rows: int) -> None:
        """One global step: its mean loss over its ``rows`` rows."""
        self.step += 1
        self.samples += rows
        self._loss_rows += loss * rows
        self._rows += rows
        self._steps += 1
        if self._steps >= self.every_steps:
            self._point()

    def end_epoch(self) -> None:
        if self._steps:
            self._point()

    def _point(self) -> None:
        loss = self._loss_rows / self._rows if self._rows else float("nan")
        self.points.append(
            CurvePoint(step=self.step, epoch=self._epoch, phase=self._phase, loss=loss, samples=self.samples)
        )
        self._loss_rows, self._rows, self._steps = 0.0, 0, 0

    def curve(self) -> TrainingCurve:
        return TrainingCurve(points=list(self.points), every_steps=self.every_steps)
