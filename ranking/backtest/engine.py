"""Backtest replay: the daily retrain, day by day, once per recipe, each in isolation.

Layout (``<home>/backtests/<id>/``)::

    spec.json                          what was asked (start, days, recipes, baseline)
    <recipe>/recipe.toml               the recipe file as given
    <recipe>/home/                     the recipe's workspace: its own registry, runs, pipeline
                                       summaries and metrics state; source, feast and windows are
                                       links to the backtested workspace's (windows are keyed by
                                       content, so recipes share every partition)
    <recipe>/home/ranker.toml          the recipe's effective config file: the workspace's config
                                       with the recipe's sections over it, metrics kept local
    <recipe>/days/<date>.json          one replayed day (see ``replay_day``), written last
    <recipe>/days/<date>.log           the day's ``ranker run`` log
    <recipe>/scores/<date>-served.parquet   the served model's scores on that day
    <recipe>/scores/<date>-candidate.parquet  the day's candidate's (its eval_scores.parquet)
    report/                            backtest.md, backtest.png, backtest.json

A day is ``ranker run --home <recipe home> --end <date>``: the same code path as the daily DAG
(window -> train -> gate -> promote | reject -> metrics). The served model of a day is the
recipe's champion *before* that day's decision; it is scored on the day's eval partition.

Base model: a recipe that warm-starts from the base (``warm_start = "base"``, or an incremental
recipe whose full retrains start from it) gets one from ``ranker pretrain --end <day>`` before
its first day and again whenever the base is ``pretrain.every_days`` old, as the weekly
``ranker_pretrain`` DAG would; the pretraining time counts in the recipe's training time.

The Feast store (the config's ``features`` section) is the backtested workspace's: every recipe
shares its ``feast/`` and ``windows/``, so a recipe may not set it, and the windows are built on
the store the ``ranker backtest`` command's own config names (``window_builder_for``).

Day-1 rule: a recipe starts with an empty registry, so on its first day (and any later day
before its first promotion) no model is served: the day has ``served = null`` and is left out
of the served means and of the bootstrap; the report says how many days each mean covers.

Reuse: each day's record carries a fingerprint chained over the previous day's (recipe config,
day, code version, the window's content id). A re-run keeps every leading day whose fingerprint
still matches and continues after it; a day that no longer matches restarts the recipe from an
empty registry (a later day's result depends on every earlier decision).
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ranking.config.loader import ConfigFileError, EffectiveConfig, Layer, file_values, parse_file, resolve
from ranking.config.model import SECTIONS
from ranking.config.render import to_toml
from ranking.core import killpoints
from ranking.core.atomic import atomic_path, atomic_write_json, atomic_write_text, read_json
from ranking.core.errors import RankerError
from ranking.core.ids import validate_run_id
from ranking.core.lifetime import PARENT_PID_ENV
from ranking.core.summaries import GateSummary, StepSummary, TrainSummary
from ranking.core.workspace import Workspace
from ranking.pipeline.pretrain import uses_base

if TYPE_CHECKING:
    from features.feast_repo import StoreSettings

log = logging.getLogger(__name__)

SHARED = ("source", "feast", "windows")
# environment a replayed day must not inherit: it would point the run at production state
_ISOLATE_ENV = (
    "RANKER_REGISTRY",
    "RANKER_CONFIG",
    "RANKER_PUSHGATEWAY_URL",
    "RANKER_HOME",
)
# config sections of the backtested workspace, not of a recipe: the Feast store (every recipe
# shares the workspace's feast/ and windows/, and a store other than the applied one is refused)
WORKSPACE_SECTIONS = ("features",)


class BacktestError(RankerError):
    """A backtest cannot be planned or one of its days could not be recorded."""


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    values: Mapping[str, Any]  # dotted keys the recipe sets (paths resolved against its folder)


@dataclass(frozen=True)
class BacktestSpec:
    start: dt.date
    days: int
    recipes: tuple[Recipe, ...]
    baseline: str
    name: str | None = None
    bootstrap_samples: int = 1000
    ci_level: float = 0.95
    seed: int = 0

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

    def to_dict(self) -> dict[str, Any]:
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


def recipe_config(recipe: Recipe, base: Mapping[str, Any], base_source: str | None) -> EffectiveConfig:
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
    # the review section is left out too: it says how recipes are compared, not how one trains
    dumped = effective.config.model_dump(mode="json")
    body = json.dumps(
        {k: v for k, v in dumped.items() if k not in (*WORKSPACE_SECTIONS, "review")}, sort_keys=True
    )
    return hashlib.sha256(body.encode()).hexdigest()


def day_fingerprint(previous: str | None, day: dt.date, config: str, code: str, window: str | None) -> str:
    body = json.dumps([previous, day.isoformat(), config, code, window])
    return hashlib.sha256(body.encode()).hexdigest()[:32]


# --------------------------------------------------------------------------------------------
# the replay
# --------------------------------------------------------------------------------------------


class Replayer(Protocol):
    """What a replayed day needs from the pipeline (a subprocess ``ranker run`` in production;
    tests substitute a fake to check the bookkeeping)."""

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, dict[str, Any]]:
        """``ranker run --end day`` in ``home``: (exit code, the run's summary)."""
        ...

    def score(self, checkpoint: Path, eval_parquet: Path) -> Any:
        """Scores frame (request_id, pin_id, saved, score) of a checkpoint on an eval partition."""
        ...

    def run_pretrain(
        self, home: Path, day: dt.date, run_id: str, log_path: Path
    ) -> tuple[int, dict[str, Any]]:
        """``ranker pretrain --end day`` in ``home``: (exit code, its summary)."""
        ...


# errors of starting a process that pass when the machine has threads or memory again
_TRANSIENT_START = (errno.EAGAIN, errno.ENOMEM)
_START_BACKOFF_SECONDS = 1.0  # the first retry's wait; doubled each time, at most 8 s


def _start_with_retries(
    cmd: list[str], env: dict[str, str], log_path: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (its stderr to ``log_path``); a fork that fails for want of threads or memory
    is retried 3 times over ~15 s before the OSError is raised."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    def transient(exc: BaseException) -> bool:
        return isinstance(exc, OSError) and exc.errno in _TRANSIENT_START

    for attempt in Retrying(
        retry=retry_if_exception(transient),
        stop=stop_after_attempt(4),
        wait=wait_exponential(multiplier=_START_BACKOFF_SECONDS, max=8),
        reraise=True,
    ):
        with attempt, open(log_path, "w") as err:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, check=False)
    raise AssertionError("unreachable: Retrying reraises")


class CliReplayer:
    """Each day is ``python -m ranking.cli run`` in a fresh process (the production entry point);
    served models are scored in-process with the functions ``ranker evaluate`` uses."""

    def __init__(self, python: str = sys.executable, run_args: tuple[str, ...] = ()) -> None:
        self.python = python
        # extra `ranker run` arguments: ("--dry-run",) replays candidates only (ranker review
        # --candidate-only): no champion is ever promoted, so no gate comparison and no served model
        self.run_args = run_args

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, dict[str, Any]]:
        return self._ranker("run", home, day, run_id, log_path, self.run_args)

    def run_pretrain(
        self, home: Path, day: dt.date, run_id: str, log_path: Path
    ) -> tuple[int, dict[str, Any]]:
        return self._ranker("pretrain", home, day, run_id, log_path)

    def _ranker(
        self,
        command: str,
        home: Path,
        day: dt.date,
        run_id: str,
        log_path: Path,
        extra: tuple[str, ...] = (),
    ) -> tuple[int, dict[str, Any]]:
        cmd = [
            self.python,
            "-m",
            "ranking.cli",
            command,
            "--home",
            str(home),
            "--end",
            day.isoformat(),
            "--run-id",
            run_id,
            "--json",
            *extra,
        ]
        # a kill point names a moment of this process, not of the day's run
        env = {k: v for k, v in os.environ.items() if k not in (*_ISOLATE_ENV, *killpoints.ENV)}
        env.setdefault("OMP_NUM_THREADS", "1")
        env[PARENT_PID_ENV] = str(os.getpid())  # the day's run dies with this replay (kill -9 too)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            proc = _start_with_retries(cmd, env, log_path)
        except OSError as exc:
            # the machine could not start a process (threads or memory exhausted by another job):
            # this day failed, in one line, instead of the whole replay with a traceback (issue 32)
            return 2, {"error": f"could not start the day's `ranker {command}`: {exc}"}
        summary: dict[str, Any] = {}
        for line in reversed(proc.stdout.strip().splitlines()):
            try:
                summary = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
        return proc.returncode, summary

    def score(self, checkpoint: Path, eval_parquet: Path) -> Any:
        from ranking.trainer.evaluation.scoring import score_checkpoint

        return score_checkpoint(checkpoint, eval_parquet)


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


def base_is_due(config: Any, day: dt.date, base_train_end: str | None) -> bool:
    """No base yet, or the current one was made ``pretrain.every_days`` or more days before ``day``
    (a base made for day X ends its range ``window.days + pretrain.gap_days`` before X)."""
    if base_train_end is None:
        return True
    made_for = dt.date.fromisoformat(base_train_end) + dt.timedelta(
        days=config.window.days + config.pretrain.gap_days
    )
    return (day - made_for).days >= config.pretrain.every_days


def _maybe_pretrain(run: RecipeRun, day: dt.date, replayer: Replayer) -> dict[str, Any] | None:
    """Pretrain the recipe's base when it is due (what the weekly DAG does); the outcome or None."""
    config = run.effective.config
    if not uses_base(config):
        return None
    from ranking.registry import Registry

    reg = Registry(str(run.home / "registry"))
    base = reg.base()
    if not base_is_due(config, day, reg.record(base).train.get("train_end") if base else None):
        return None
    started = time.perf_counter()
    run_id = f"backtest-pretrain__{day.isoformat()}__{len(reg.history('base')) + 1}"
    code, summary = replayer.run_pretrain(
        run.home, day, run_id, run.folder / "days" / f"{day.isoformat()}-pretrain.log"
    )
    return {
        "exit_code": code,
        "version": summary.get("version"),
        "base_range": summary.get("base_range"),
        "error": summary.get("error") if code != 0 else None,
        # the pretrain's own duration (as train_seconds is the train step's), else the wall time here
        "seconds": summary.get("duration_seconds") or round(time.perf_counter() - started, 3),
    }


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


def _champion(home: Path) -> tuple[str | None, dict[str, Any]]:
    from ranking.registry import Registry

    reg = Registry(str(home / "registry"))
    version = reg.champion()
    return version, (reg.record(version).train if version else {})


def _version_count(home: Path) -> int:
    from ranking.registry import Registry

    return len(Registry(str(home / "registry")).version_ids())


def _step_summary(home: Path, run_id: str, step: str) -> StepSummary | None:
    """The day's recorded ``step`` summary through its model (None: the step did not record one,
    e.g. the run stopped before it); one that does not fit its model stops the backtest."""
    from pydantic import ValidationError

    from ranking.core.summaries import not_a_summary, parse_summary

    path = home / "pipeline" / run_id / f"{step}.json"
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    try:
        return parse_summary(data, step)
    except ValidationError as exc:
        raise BacktestError(not_a_summary(path, step, exc)) from None


def _window_manifest(shared_home: Path, day: dt.date, days: int) -> dict[str, Any] | None:
    path = shared_home / "windows" / f"{day.isoformat()}_{days}d" / "manifest.json"
    try:
        found: dict[str, Any] = read_json(path)
        return found
    except (OSError, ValueError):
        return None


def _candidate_metrics(home: Path, version: str | None) -> dict[str, Any] | None:
    if not version:
        return None
    from ranking.registry import Registry

    try:
        found: dict[str, Any] = json.loads(Registry(str(home / "registry")).read_file(version, "eval.json"))
        return found
    except (RankerError, ValueError):
        return None


def _copy_candidate_scores(run: RecipeRun, day: dt.date, version: str | None) -> str | None:
    """The candidate's eval scores beside the served model's (for the paired candidate comparison)."""
    if not version:
        return None
    from ranking.registry import Registry

    try:
        data = Registry(str(run.home / "registry")).read_file(version, "eval_scores.parquet")
    except RankerError:
        return None
    path = run.candidate_scores_path(day)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return str(path.relative_to(run.folder))


def beat_served(candidate: Mapping[str, Any] | None, served: Mapping[str, Any] | None) -> bool | None:
    """Candidate save HIT@3 above the served model's on the same eval day (None: no comparison)."""
    cand = (candidate or {}).get("save_hit_at_3")
    base = ((served or {}).get("metrics") or {}).get("save_hit_at_3")
    if not isinstance(cand, int | float) or not isinstance(base, int | float):
        return None
    return bool(cand > base)


def _checkpoint(run: RecipeRun, version: str) -> Path:
    from ranking.registry import Registry, cache_dir

    reg = Registry(str(run.home / "registry"))
    return reg.local_dir(version, cache_dir(Workspace.resolve(run.home))) / "model.pt"


def forward_choice(
    run: RecipeRun,
    previous: Mapping[str, Any] | None,
    served: Mapping[str, Any],
    eval_parquet: Path,
    replayer: Replayer,
) -> dict[str, Any] | None:
    """The day before's gate choice seen on this day's impressions (ranking/backtest/gates.py has the
    timeline): the fresh candidate ``c_{D-1}`` and the other model of that choice (the replaced
    champion if it was promoted, else ``c_{D-1}`` itself), each with its save HIT@3 here; the one
    not served today is scored once more. None on the first day or without a candidate yesterday."""
    from ranking.evaluation.scores import metrics_of

    fresh = ((previous or {}).get("candidate") or {}).get("version")
    if not fresh:
        return None
    served_hit = (served.get("metrics") or {}).get("save_hit_at_3")
    promoted = served.get("version") == fresh
    other = (previous or {}).get("champion_before") if promoted else fresh

    def hit(version: str | None) -> float | None:
        if version is None:
            return None
        if version == served.get("version"):
            return served_hit  # type: ignore[no-any-return]
        return float(metrics_of(replayer.score(_checkpoint(run, version), eval_parquet)).save_hit_at_3)

    return {
        "fresh": fresh,
        "promoted_fresh": promoted,
        "fresh_save_hit_at_3": hit(fresh),
        "other": other,
        "other_save_hit_at_3": hit(other),
    }


def replay_day(
    run: RecipeRun,
    day: dt.date,
    fingerprint: str,
    replayer: Replayer,
    shared_home: Path,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Replay one day of one recipe and return its record (also written to ``days/<date>.json``);
    ``previous``: the day before's record (its gate choice is scored on this day for the regret)."""
    from ranking.evaluation.scores import write_scores

    started = time.perf_counter()
    pretrained = _maybe_pretrain(run, day, replayer)
    champion, champion_train = _champion(run.home)
    attempt = len(list((run.home / "pipeline").glob(f"backtest__{day.isoformat()}__*"))) + 1
    run_id = f"backtest__{day.isoformat()}__{attempt}"
    exit_code, summary = replayer.run_day(
        run.home, day, run_id, run.folder / "days" / f"{day.isoformat()}.log"
    )
    trained = _step_summary(run.home, run_id, "train")
    train = trained if isinstance(trained, TrainSummary) else None
    judged = _step_summary(run.home, run_id, "gate")
    gate = judged if isinstance(judged, GateSummary) else None  # a gate that failed judged nothing
    version = summary.get("version") or (train.version if train else None)

    served: dict[str, Any] | None = None
    if champion is not None:
        manifest = _window_manifest(shared_home, day, run.effective.config.window.days)
        trained_for = champion_train.get("train_end")
        served = {
            "version": champion,
            "trained_for": trained_for,
            "age_days": (day - dt.date.fromisoformat(trained_for)).days if trained_for else None,
            "metrics": None,
        }
        if manifest is not None:
            from ranking.evaluation.scores import metrics_of

            scores = replayer.score(_checkpoint(run, champion), Path(manifest["eval"]["path"]))
            write_scores(run.served_scores_path(day), scores)
            served["metrics"] = metrics_of(scores).to_dict()
            served["scores"] = str(run.served_scores_path(day).relative_to(run.folder))
            served["forward"] = forward_choice(
                run, previous, served, Path(manifest["eval"]["path"]), replayer
            )

    after, _ = _champion(run.home)
    candidate_metrics = _candidate_metrics(run.home, version)
    candidate_scores = _copy_candidate_scores(run, day, version)
    record: dict[str, Any] = {
        "day": day.isoformat(),
        "fingerprint": fingerprint,
        "run_id": run_id,
        "exit_code": exit_code,
        "error": summary.get("error") if exit_code not in (0, 1) else None,
        "served": served,
        "candidate": {"version": version, "metrics": candidate_metrics, "scores": candidate_scores}
        if version
        else None,
        "pretrain": pretrained,
        "decision": summary.get("decision"),
        # the gate judged by the outcome: did the candidate beat the served model on this eval day?
        "gate_decision": gate.decision if gate else None,
        "candidate_beat_served": beat_served(candidate_metrics, served),
        "failed_checks": summary.get("failed_checks") or (gate.failed_checks if gate else []),
        "relative_change": gate.relative_change if gate else None,
        "gate_ci": list(gate.ci) if gate and gate.ci is not None else None,
        "promoted": bool(summary.get("promoted")),
        "kept_champion": bool(summary.get("kept_champion")),
        "champion_before": champion,
        "champion_after": after,
        "versions_after": _version_count(run.home),
        "train_seconds": train.duration_seconds if train else None,
        "pretrain_seconds": (pretrained or {}).get("seconds"),
        "run_seconds": round(time.perf_counter() - started, 3),
    }
    atomic_write_json(run.day_path(day), record)
    killpoints.reached("replay:day-recorded")
    return record


# --------------------------------------------------------------------------------------------
# the backtest
# --------------------------------------------------------------------------------------------

Progress = Callable[[str, int, int, float], None]
# (workspace, eval day, window days, checks) -> the window's manifest
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
    base_config: Mapping[str, Any] = field(default_factory=dict)
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

    def run(self) -> dict[str, list[dict[str, Any]]]:
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
    ) -> list[dict[str, Any]]:
        prepare_recipe_home(run, self.ws.root)
        digest = config_digest(run.effective)
        expected: list[str] = []
        previous: str | None = None
        for day in self.spec.eval_days:
            previous = day_fingerprint(
                previous, day, digest, self.code_version, windows.get((day, run.effective.config.window.days))
            )
            expected.append(previous)

        records: list[dict[str, Any]] = []
        for i, day in enumerate(self.spec.eval_days):
            path = run.day_path(day)
            if not path.is_file():
                break
            kept = read_json(path)
            if kept.get("fingerprint") != expected[i]:
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
        champion, _ = _champion(run.home)
        left = records[-1]["champion_after"] if records else None
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
            self._tick(f"{run.recipe.name} {record['day']} (reused)")
        for i in range(len(records), self.spec.days):
            day = self.spec.eval_days[i]
            before = records[-1] if records else None
            records.append(replay_day(run, day, expected[i], self.replayer, self.ws.root, before))
            self._tick(f"{run.recipe.name} {day}")
        return records


def compare_to_baseline(
    bt: Backtest, records: Mapping[str, list[dict[str, Any]]], who: str = "served"
) -> dict[str, Any]:
    """Each non-baseline recipe's paired comparison with the baseline over the days both had a
    model: ``who = "served"`` (the models production served) or ``"candidate"`` (each day's freshly
    trained model, before the gate: the recipe's training itself, without the gate's choices)."""
    base = bt.spec.baseline
    return {name: compare_recipes(bt, records, name, base, who) for name in records if name != base}


def compare_recipes(
    bt: Backtest, records: Mapping[str, list[dict[str, Any]]], name: str, reference: str, who: str = "served"
) -> Any:
    """Recipe ``name``'s ``who`` models paired with ``reference``'s over the days both had one
    (``ranking.backtest.stats.compare``; None without a common day)."""
    import pandas as pd

    from ranking.backtest.stats import compare, paired_day

    folders = {run.recipe.name: run.folder for run in bt.runs}

    def scores(recipe: str, record: Mapping[str, Any]) -> Any:
        found = record.get(who) or {}
        rel = found.get("scores")
        return pd.read_parquet(folders[recipe] / rel) if rel else None

    base_days = {r["day"]: r for r in records[reference]}
    pairs = []
    for r in records[name]:
        b = base_days.get(r["day"])
        if b is None:
            continue
        b_scores, o_scores = scores(reference, b), scores(name, r)
        if b_scores is None or o_scores is None:
            continue
        pairs.append(paired_day(r["day"], b_scores, o_scores))
    return compare(pairs, samples=bt.spec.bootstrap_samples, level=bt.spec.ci_level, seed=bt.spec.seed)


def delayed_update_pairs(bt: Backtest) -> list[tuple[str, str]]:
    """``(with, without)``: the backtest's recipes whose effective configs differ only in a frozen
    first epoch: the same joint epochs after it (F,J vs J) or that epoch joint instead (F,J vs
    J,J). Their comparison is the delayed update's own share of a recipe's lift."""
    from ranking.trainer.schedule import FROZEN, JOINT, resolve_schedule

    def phases(run: Any) -> tuple[str, ...]:
        recipe = run.effective.config.recipe
        return resolve_schedule(recipe.schedule, recipe.epoch_count)

    def rest(run: Any) -> str:
        dumped = run.effective.config.model_dump(mode="json")
        dumped.pop("metrics", None)
        dumped["recipe"] = {k: v for k, v in dumped["recipe"].items() if k not in ("schedule", "epochs")}
        return json.dumps(dumped, sort_keys=True)

    out = []
    for a in bt.runs:
        pa = phases(a)
        if pa[0] != FROZEN:
            continue
        for b in bt.runs:
            if b is not a and phases(b) in (pa[1:], (JOINT, *pa[1:])) and rest(a) == rest(b):
                out.append((a.recipe.name, b.recipe.name))
    return out


def _eval_columns(bt: Backtest, day: dt.date, columns: list[str]) -> Any:
    """``columns`` of ``day``'s eval partition (the first recipe's window length); None when the
    day's window was not built or lacks one of them."""
    import pyarrow.parquet as pq

    manifest = _window_manifest(bt.ws.root, day, bt.runs[0].effective.config.window.days)
    if manifest is None:
        return None
    parquet = Path(manifest["eval"]["path"])
    if not set(columns) <= set(pq.read_schema(parquet).names):
        return None
    return pq.read_table(parquet, columns=columns).to_pandas()


def heuristic_day_scores(bt: Backtest, day: dt.date) -> Any:
    """The non-learned heuristic's scores on ``day``'s eval partition (the backtested workspace's
    ``[heuristic]``, the first recipe's config), kept under ``<backtest>/heuristic/``; None when
    the day's window was not built or lacks the heuristic's columns."""
    import pandas as pd

    from ranking.evaluation.heuristic import HEURISTIC_COLUMNS, heuristic_scores
    from ranking.evaluation.scores import write_scores

    path = bt.folder / "heuristic" / f"{day.isoformat()}.parquet"
    if path.is_file():
        return pd.read_parquet(path)
    config = bt.runs[0].effective.config
    examples = _eval_columns(bt, day, ["request_id", "pin_id", "saved", *HEURISTIC_COLUMNS])
    if examples is None:
        return None
    scores = heuristic_scores(examples, config.heuristic.heuristic_config())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_scores(path, scores)
    return scores


def compare_to_heuristic(
    bt: Backtest, records: Mapping[str, list[dict[str, Any]]], who: str = "served"
) -> dict[str, Any]:
    """Each recipe's paired comparison with the non-learned heuristic over the days it had a
    ``who`` model (served | candidate), as :func:`compare_to_baseline` pairs two recipes."""
    import pandas as pd

    from ranking.backtest.stats import compare, paired_day

    folders = {run.recipe.name: run.folder for run in bt.runs}
    out: dict[str, Any] = {}
    for name, days in records.items():
        pairs = []
        for r in days:
            rel = (r.get(who) or {}).get("scores")
            if not rel:
                continue
            heuristic = heuristic_day_scores(bt, dt.date.fromisoformat(r["day"]))
            if heuristic is not None:
                pairs.append(paired_day(r["day"], heuristic, pd.read_parquet(folders[name] / str(rel))))
        out[name] = compare(
            pairs, samples=bt.spec.bootstrap_samples, level=bt.spec.ci_level, seed=bt.spec.seed
        )
    return out


def slice_day_frame(bt: Backtest, day: dt.date) -> Any:
    """``day``'s slices (``ranking.evaluation.slices.slice_frame`` with the first recipe's
    ``[slices]``) on its eval partition, kept under ``<backtest>/slices/``; None when the day's
    window was not built or lacks the slices' columns."""
    import pandas as pd

    from ranking.core.atomic import atomic_path
    from ranking.evaluation.slices import slice_frame

    path = bt.folder / "slices" / f"{day.isoformat()}.parquet"
    if path.is_file():
        return pd.read_parquet(path)
    slices = bt.runs[0].effective.config.slices.slice_config()
    examples = _eval_columns(bt, day, ["request_id", "pin_id", *slices.columns_needed])
    if examples is None:
        return None
    frame = slice_frame(examples, slices)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return frame


def compare_slices_to_baseline(
    bt: Backtest, records: Mapping[str, list[dict[str, Any]]], who: str = "served"
) -> dict[str, list[dict[str, Any]]]:
    """Each non-baseline recipe's ``who`` models against the baseline's in every slice of the
    eval days both had one (``ranking.backtest.stats.compare_slices``)."""
    import numpy as np
    import pandas as pd

    from ranking.backtest.stats import SliceDay, compare_slices

    folders = {run.recipe.name: run.folder for run in bt.runs}
    base = bt.spec.baseline
    keys = ["request_id", "pin_id"]

    def scores(name: str, record: Mapping[str, Any] | None) -> Any:
        rel = ((record or {}).get(who) or {}).get("scores")
        return pd.read_parquet(folders[name] / rel).sort_values(keys, ignore_index=True) if rel else None

    base_days = {r["day"]: r for r in records[base]}
    out: dict[str, list[dict[str, Any]]] = {}
    for name, days in records.items():
        if name == base:
            continue
        cut = []
        for r in days:
            b, o = scores(base, base_days.get(r["day"])), scores(name, r)
            slices = (
                slice_day_frame(bt, dt.date.fromisoformat(r["day"]))
                if b is not None and o is not None
                else None
            )
            if slices is None:
                continue
            aligned = b[keys].merge(slices, on=keys, how="left", validate="one_to_one")
            names = [c for c in slices.columns if c not in keys]
            if aligned[names].isna().to_numpy().any() or not b[keys].equals(o[keys]):
                raise BacktestError(f"{r['day']}: the slices or the models do not cover the same impressions")
            masks = {n: aligned[n].to_numpy(dtype=bool) for n in names}
            models = (b["score"].to_numpy(dtype=np.float64), o["score"].to_numpy(dtype=np.float64))
            cut.append(SliceDay.of(r["day"], b["request_id"], b["saved"], models, masks))
        out[name] = compare_slices(
            cut, samples=bt.spec.bootstrap_samples, level=bt.spec.ci_level, seed=bt.spec.seed
        )
    return out


def backtest_report(
    bt: Backtest,
    records: Mapping[str, list[dict[str, Any]]],
    wall_seconds: float,
    *,
    candidate_only: bool = False,
) -> dict[str, Any]:
    """The backtest report (strict JSON) of replayed ``records``: every recipe against the
    baseline (its served models, unless ``candidate_only``, and its candidates), against the
    non-learned heuristic, slice by slice, and each pair that differs only in the delayed update
    (``delayed_update_pairs``). What ``ranker backtest`` writes and the review weighs."""
    from ranking.backtest.report import build_report

    whose = ("candidate",) if candidate_only else ("served", "candidate")
    delayed = [
        {
            "with": with_frozen,
            "without": without,
            **{who: compare_recipes(bt, records, with_frozen, without, who) for who in whose},
        }
        for with_frozen, without in delayed_update_pairs(bt)
    ]
    return finite_json(
        build_report(
            bt.spec.to_dict(),
            records,
            {} if candidate_only else compare_to_baseline(bt, records),
            wall_seconds,
            compare_to_baseline(bt, records, who="candidate"),
            {who: compare_to_heuristic(bt, records, who) for who in whose},
            {who: compare_slices_to_baseline(bt, records, who) for who in whose},
            delayed,
        )
    )


def finite_json(obj: Any) -> Any:
    """NaN/inf -> None, so the report is strict JSON."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj
