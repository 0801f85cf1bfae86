"""What a backtest replays: the spec (eval days, recipes, baseline, the bootstrap's settings), each
recipe's file and effective config, and a recipe's folders (``RecipeRun``: ``<backtest>/<recipe>/``,
its workspace ``home/``, ``days/`` and ``scores/``). Eval days the workspace's data cannot serve
are refused before anything runs.

The Feast store (the config's ``features`` section) is the backtested workspace's: every recipe
shares its ``feast/`` and ``windows/``, so a recipe may not set it (``recipe_config``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ranking.config.loader import (
    ConfigFileError,
    EffectiveConfig,
    Layer,
    RawValue,
    file_values,
    parse_file,
    resolve,
)
from ranking.core.errors import RankerError
from ranking.core.ids import validate_run_id
from ranking.core.workspace import Workspace

# config sections of the backtested workspace, not of a recipe: the Feast store (every recipe
# shares the workspace's feast/ and windows/, and a store other than the applied one is refused)
WORKSPACE_SECTIONS = ("features",)


class BacktestError(RankerError):
    """A backtest cannot be planned or one of its days could not be recorded."""


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    values: Mapping[str, RawValue]  # dotted keys the recipe sets (paths resolved against its folder)


class RecipeEntry(TypedDict):
    file: str
    sets: dict[str, RawValue]
    """what the recipe file sets, as written"""


class SpecRecord(TypedDict):
    """A backtest's spec as recorded (spec.json, the reports' ``spec``)."""

    start: str
    days: int
    recipes: dict[str, RecipeEntry]
    baseline: str
    id: str
    bootstrap_samples: int
    ci_level: float
    seed: int


@dataclass(frozen=True)
class BacktestSpec:
    start: dt.date
    days: int
    recipes: tuple[Recipe, ...]
    baseline: str
    # the bootstrap's settings: the config's [backtest] (`ranker backtest`, ReviewPlan.spec)
    bootstrap_samples: int
    ci_level: float
    seed: int
    name: str | None = None

    def __post_init__(self) -> None:
        if self.days <= 0:
            raise BacktestError(f"--days must be > 0 (got {self.days})")
        names = [r.name for r in self.recipes]
        if not names:
            raise BacktestError("give at least one --recipe NAME=FILE")
        if len(set(names)) != len(names):
            raise BacktestError(f"recipe names must be unique: {names}")
        if self.baseline not in names:
            raise BacktestError(
                f"--baseline {self.baseline!r} is not one of the recipes ({', '.join(names)})"
            )

    @property
    def eval_days(self) -> list[dt.date]:
        return [self.start + dt.timedelta(days=i) for i in range(self.days)]

    @property
    def id(self) -> str:
        return validate_run_id(self.name or f"from-{self.start.isoformat()}")

    def to_dict(self) -> SpecRecord:
        """The spec as spec.json and the reports record it."""
        return {
            "start": self.start.isoformat(),
            "days": self.days,
            "recipes": {r.name: {"file": str(r.path), "sets": dict(r.values)} for r in self.recipes},
            "baseline": self.baseline,
            "id": self.id,
            "bootstrap_samples": self.bootstrap_samples,
            "ci_level": self.ci_level,
            "seed": self.seed,
        }


@dataclass
class RecipeRun:
    recipe: Recipe
    folder: Path
    effective: EffectiveConfig

    @property
    def home(self) -> Path:
        return self.folder / "home"

    def day_path(self, day: dt.date) -> Path:
        return self.folder / "days" / f"{day.isoformat()}.json"

    def served_scores_path(self, day: dt.date) -> Path:
        return self.folder / "scores" / f"{day.isoformat()}-served.parquet"

    def candidate_scores_path(self, day: dt.date) -> Path:
        return self.folder / "scores" / f"{day.isoformat()}-candidate.parquet"


def source_days(ws: Workspace) -> tuple[dt.date, dt.date] | None:
    """The first and last day of the workspace's impressions (``source/impressions/date=D``)."""
    found = []
    for path in (ws.root / "source" / "impressions").glob("date=*"):
        try:
            found.append(dt.date.fromisoformat(path.name.removeprefix("date=")))
        except ValueError:
            continue
    return (min(found), max(found)) if found else None


def check_days_against_data(ws: Workspace, start: dt.date, days: int, window_days: int) -> None:
    """Refuse, before anything runs, eval days the workspace's data cannot serve: each needs its
    own impressions and ``window_days`` days before it."""
    span = source_days(ws)
    if span is None:
        raise BacktestError(
            f"no impressions under {ws.root / 'source'}: run `ranker data synth|import` first"
        )
    first, last = span
    earliest = first + dt.timedelta(days=window_days)
    if days > (last - first).days + 1:
        raise BacktestError(
            f"--days {days} is more than the {(last - first).days + 1} days of data in {ws.root} ({first} .. {last})"
        )
    end = start + dt.timedelta(days=days - 1)
    if start < earliest or end > last:
        raise BacktestError(
            f"eval days {start} .. {end} need data from {start - dt.timedelta(days=window_days)} to {end}; "
            f"the workspace has {first} .. {last} (eval days {earliest} .. {last} fit)"
        )


def read_recipe(name: str, path: Path) -> Recipe:
    """A recipe file: a pipeline config holding only the sections it changes."""
    validate_run_id(name)
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise BacktestError(f"recipe {name}: no file at {path}")
    return Recipe(name, path, file_values(path, parse_file(path)))


def recipe_config(recipe: Recipe, base: Mapping[str, RawValue], base_source: str | None) -> EffectiveConfig:
    """The recipe's effective config: defaults < the workspace's config < the recipe's sections;
    a backtest never pushes metrics anywhere and keeps its textfile inside the recipe's home."""
    shared = sorted(k for k in recipe.values if k.split(".")[0] in WORKSPACE_SECTIONS)
    if shared:
        raise BacktestError(
            f"recipe {recipe.name}: {shared[0]}: the Feast store is the backtested workspace's (every"
            " recipe shares its feast/ and windows/): set it in the workspace's config, not in a recipe"
        )
    layers = []
    if base_source:
        layers.append(Layer(base_source, dict(base)))
    layers.append(Layer(f"file:{recipe.path}", dict(recipe.values)))
    layers.append(Layer("backtest", {"metrics.pushgateway": "", "metrics.textfile": None}))
    try:
        return resolve(layers)
    except ConfigFileError as exc:
        raise BacktestError(f"recipe {recipe.name}: {exc}") from None


def config_digest(effective: EffectiveConfig) -> str:
    # the Feast store is left out: it does not change a window (its content id, which the day's
    # fingerprint carries, is the same on every store), and days recorded before the section
    # existed keep their fingerprints
    # the review and backtest sections are left out too: they say how recipes are compared, not
    # how one trains (and days recorded before [backtest] existed keep their fingerprints)
    dumped = effective.config.model_dump(mode="json")
    body = json.dumps(
        {k: v for k, v in dumped.items() if k not in (*WORKSPACE_SECTIONS, "review", "backtest")},
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()
