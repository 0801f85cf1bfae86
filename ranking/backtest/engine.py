"""The backtest: the daily retrain, day by day, once per recipe, each in isolation (``Backtest``).

Layout (``<home>/backtests/<id>/``)::

    spec.json                          what was asked (start, days, recipes, baseline)
    <recipe>/recipe.toml               the recipe file as given
    <recipe>/home/                     the recipe's workspace: its own registry, runs, pipeline
                                       summaries and metrics state; source, feast and windows are
                                       links to the backtested workspace's (windows are keyed by
                                       content, so recipes share every partition)
    <recipe>/home/ranker.toml          the recipe's effective config file: the workspace's config
                                       with the recipe's sections over it, metrics kept local
    <recipe>/days/<date>.json          one replayed day (``ranking.backtest.replay.replay_day``), written last
    <recipe>/days/<date>.log           the day's ``ranker run`` log
    <recipe>/scores/<date>-served.parquet   the served model's scores on that day
    <recipe>/scores/<date>-candidate.parquet  the day's candidate's (its eval_scores.parquet)
    report/                            backtest.md, backtest.png, backtest.json

The spec and the recipes: ``ranking.backtest.spec``; a day's replay: ``ranking.backtest.replay``;
its record: ``ranking.backtest.day``; the records compared and reported: ``ranking.backtest.compare``.

Windows are built before any recipe runs, in the backtested workspace, on the store the
``ranker backtest`` command's own config names (``window_builder_for``).

Reuse: each day's record carries a fingerprint chained over the previous day's (recipe config,
day, code version, the window's content id). A re-run keeps every leading day whose fingerprint
still matches and continues after it; a day that no longer matches restarts the recipe from an
empty registry (a later day's result depends on every earlier decision).
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.backtest.day import DayRecord, champion_of, day_fingerprint
from ranking.backtest.replay import Replayer, replay_day
from ranking.backtest.spec import BacktestError, BacktestSpec, RecipeRun, config_digest, recipe_config
from ranking.config.loader import RawValue
from ranking.config.model import SECTIONS
from ranking.config.render import to_toml
from ranking.core.atomic import atomic_write_json, atomic_write_text
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.pipeline.pretrain import uses_base

if TYPE_CHECKING:
    from features.feast_repo import StoreSettings

log = logging.getLogger(__name__)

SHARED = ("source", "feast", "windows")


def prepare_recipe_home(run: RecipeRun, shared_home: Path) -> None:
    """The recipe's workspace: links to the shared data, its own everything else, its config."""
    run.home.mkdir(parents=True, exist_ok=True)
    for name in SHARED:
        link = run.home / name
        target = shared_home / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        if link.exists() or link.is_symlink():
            raise BacktestError(f"{link} exists and is not a link to {target}")
        target.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
    shutil.copy2(run.recipe.path, run.folder / "recipe.toml")
    dumped = run.effective.config.model_dump(mode="json")
    changed = {
        s: {k: v for k, v in dumped[s].items() if run.effective.sources[f"{s}.{k}"] != "default"}
        for s in SECTIONS
    }
    # a replayed day's `ranker run` is a child of the backtest's MLflow run (ranker backtest, ranker
    # review track it with its parent), never a run of its own: the recipe's home tracks nothing
    changed["tracking"] = {"enabled": False}
    atomic_write_text(
        run.home / "ranker.toml",
        f"# written by ranker backtest: recipe {run.recipe.name} ({run.recipe.path}) over the workspace config\n"
        + to_toml({s: body for s, body in changed.items() if body}),
    )


def _reset(run: RecipeRun) -> None:
    for name in ("registry", "runs", "pipeline", "metrics", "cache"):
        shutil.rmtree(run.home / name, ignore_errors=True)
    shutil.rmtree(run.folder / "days", ignore_errors=True)
    shutil.rmtree(run.folder / "scores", ignore_errors=True)


Progress = Callable[[str, int, int, float], None]
# (workspace, eval day, window days, checks) -> the window's manifest, as build_window returns it
# (untyped until features.window's WindowManifest model lands; only its window_id is read here)
WindowBuilder = Callable[[Workspace, dt.date, int, Any], Mapping[str, Any]]


def window_builder_for(settings: StoreSettings | None) -> WindowBuilder:
    """The window builder on the Feast store ``settings`` (the ``ranker backtest`` command's
    ``features`` section: the store the backtested workspace was applied with)."""

    def build(ws: Workspace, day: dt.date, days: int, checks: Any) -> Mapping[str, Any]:
        from features.window import build_window

        return build_window(ws, day, days, checks, settings)

    return build


# None: feast_repo.store_settings()'s environment fallback (the CLI passes its config's store)
_build_window = window_builder_for(None)


@dataclass
class Backtest:
    ws: Workspace
    spec: BacktestSpec
    replayer: Replayer
    base_config: Mapping[str, RawValue] = field(default_factory=dict)
    base_source: str | None = None  # file:PATH of the workspace's config, if it has one
    parallel: int = 1
    on_progress: Progress | None = None
    code_version: str = ""
    window_builder: WindowBuilder = _build_window

    def __post_init__(self) -> None:
        self.folder = self.ws.root / "backtests" / self.spec.id
        self.runs = [
            RecipeRun(r, self.folder / r.name, recipe_config(r, self.base_config, self.base_source))
            for r in self.spec.recipes
        ]
        self._lock = threading.Lock()
        self._done = 0
        self._started = 0.0

    def _tick(self, label: str) -> None:
        with self._lock:
            self._done += 1
            done = self._done
        if self.on_progress:
            self.on_progress(
                label, done, len(self.runs) * self.spec.days, time.perf_counter() - self._started
            )

    def build_windows(self) -> dict[tuple[dt.date, int], str | None]:
        """Every (day, window length) the recipes need (the base's ranges too), built once before
        any recipe runs, in the backtested workspace (so recipes running in parallel only ever
        reuse partitions, and a recipe's home never builds one). A window that fails its checks
        is left to fail in each recipe's run, where it is recorded."""
        ids: dict[tuple[dt.date, int], str | None] = {}
        for day in self.spec.eval_days:
            for run in self.runs:
                config = run.effective.config
                wanted = [(day, config.window.days)]
                if uses_base(config):  # the base's range, for a pretrain on this day
                    base_end = day - dt.timedelta(days=config.window.days + config.pretrain.gap_days)
                    wanted.append((base_end, config.pretrain.days or config.window.days))
                for end, days in wanted:
                    if (end, days) in ids:
                        continue
                    try:
                        manifest = self.window_builder(self.ws, end, days, config.window.checks())
                        ids[(end, days)] = str(manifest["window_id"])
                    except RankerError as exc:
                        log.warning("backtest: window %s (%dd) failed: %s", end, days, exc)
                        ids[(end, days)] = None
        return ids

    def run(self) -> dict[str, list[DayRecord]]:
        """Replay every recipe (up to ``parallel`` at a time); returns each recipe's day records."""
        self._refuse_to_shorten()
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.folder / "spec.json", self.spec.to_dict())
        windows = self.build_windows()
        self._started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, self.parallel)) as pool:
            futures = {run.recipe.name: pool.submit(self._run_recipe, run, windows) for run in self.runs}
            return {name: future.result() for name, future in futures.items()}

    def _refuse_to_shorten(self) -> None:
        """A recipe's registry holds the models of every day it recorded: a shorter replay under the
        same id could not continue from it and would wipe those days."""
        last = self.spec.eval_days[-1].isoformat()
        for run in self.runs:
            later = sorted(p.stem for p in (run.folder / "days").glob("*.json") if p.stem > last)
            if later:
                raise BacktestError(
                    f"backtest {self.spec.id}: recipe {run.recipe.name} has {len(later)} recorded day(s) "
                    f"after {last} (up to {later[-1]}); give this shorter replay another --name"
                )

    def _run_recipe(
        self, run: RecipeRun, windows: Mapping[tuple[dt.date, int], str | None]
    ) -> list[DayRecord]:
        prepare_recipe_home(run, self.ws.root)
        digest = config_digest(run.effective)
        expected: list[str] = []
        previous: str | None = None
        for day in self.spec.eval_days:
            previous = day_fingerprint(
                previous, day, digest, self.code_version, windows.get((day, run.effective.config.window.days))
            )
            expected.append(previous)

        records: list[DayRecord] = []
        for i, day in enumerate(self.spec.eval_days):
            path = run.day_path(day)
            if not path.is_file():
                break
            kept = DayRecord.read(path)
            if kept.fingerprint != expected[i]:
                log.info(
                    "backtest %s: %s changed (recipe, code or data): replaying from day 1",
                    run.recipe.name,
                    day,
                )
                records = []
                _reset(run)
                break
            records.append(kept)
        # continue after the reused days, from the registry state they left
        champion, _ = champion_of(run.home)
        left = records[-1].champion_after if records else None
        if champion != left:
            log.info(
                "backtest %s: the registry's champion (%s) is not the one the last recorded day left (%s):"
                " replaying from day 1",
                run.recipe.name,
                champion,
                left,
            )
            records = []
            _reset(run)
        for record in records:
            self._tick(f"{run.recipe.name} {record.day} (reused)")
        for i in range(len(records), self.spec.days):
            day = self.spec.eval_days[i]
            before = records[-1] if records else None
            records.append(replay_day(run, day, expected[i], self.replayer, self.ws.root, before))
            self._tick(f"{run.recipe.name} {day}")
        return records
