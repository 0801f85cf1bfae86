"""One replayed day's record (``DayRecord``, ``<recipe>/days/<date>.json``, written by
``replay.replay_day``) and what it is read from: the recipe registry's champion and versions, the day's recorded step
summaries, the window's manifest, the candidate's registered metrics and eval scores; whether the
candidate beat the served model; and the fingerprint chained over the previous day's (recipe
config, day, code version, the window's content id) that says whether a recorded day may be reused.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, JsonValue

from ranking.backtest.spec import BacktestError, RecipeRun
from ranking.core.atomic import atomic_path, read_json
from ranking.core.errors import RankerError
from ranking.core.summaries import StepSummary
from ranking.core.workspace import Workspace

# a number as recorded: a JSON integer stays one (a float field would write 3 back as 3.0)
Number = float | int


class RecordedMetrics(BaseModel):
    """A model's offline metrics on the eval day, as recorded: the served model's
    (``OfflineMetrics``), or the candidate's registered eval.json (with its ``eval_date``)."""

    # eval.json's keys beyond these (another version's) stay in the record as they were read
    model_config = ConfigDict(extra="allow")

    save_hit_at_3: Number | None = None
    auc: Number | None = None
    ne: Number | None = None
    log_loss: Number | None = None
    calibration: Number | None = None
    base_rate: Number | None = None
    rows: int | None = None
    requests_with_save: int | None = None
    eval_date: str | None = None

    def value(self, metric: str) -> float | None:
        """``metric`` (save_hit_at_3, auc, ne) as a float; None when not recorded or not a number."""
        found = getattr(self, metric, None)
        return float(found) if isinstance(found, int | float) else None


class ForwardChoice(BaseModel):
    """The day before's gate choice seen on this day's impressions (``replay.forward_choice``)."""

    fresh: str
    """the day before's candidate"""
    promoted_fresh: bool
    fresh_save_hit_at_3: Number | None
    other: str | None
    """the other model of that choice: the replaced champion if the fresh one was promoted, else itself"""
    other_save_hit_at_3: Number | None


class ServedModel(BaseModel):
    """The recipe's champion before the day's decision, scored on the day's eval impressions."""

    version: str
    trained_for: str | None
    age_days: int | None
    metrics: RecordedMetrics | None
    # set (with ``forward``) only when the day's window was built and the model scored on it
    scores: str | None = None
    forward: ForwardChoice | None = None


class DayCandidate(BaseModel):
    """The model the day's run trained: its registered metrics and eval scores (copied beside the served's)."""

    version: str
    metrics: RecordedMetrics | None
    scores: str | None


class DayPretrain(BaseModel):
    """The base pretrained before the day (``ranker pretrain``, when due)."""

    exit_code: int
    version: str | None
    base_range: list[str] | None
    error: str | None
    seconds: Number | None


class DayRecord(BaseModel):
    """One replayed day of one recipe (``<recipe>/days/<date>.json``). Records written before a
    key was kept lack it (``candidate_beat_served``, ``gate_decision``): what the record held is
    what ``to_json`` writes back, so the report embeds a day as it was recorded."""

    # a record written by an older version keeps the keys this one no longer writes
    model_config = ConfigDict(extra="allow")

    day: str
    fingerprint: str | None = None
    run_id: str | None = None
    exit_code: int | None = None
    error: str | None = None
    served: ServedModel | None = None
    candidate: DayCandidate | None = None
    pretrain: DayPretrain | None = None
    decision: str | None = None
    gate_decision: str | None = None
    """the gate's own decision (null: the gate did not judge)"""
    candidate_beat_served: bool | None = None
    """the gate judged by the outcome: did the candidate beat the served model on this eval day?"""
    failed_checks: list[str] = []
    relative_change: Number | None = None
    gate_ci: list[Number] | None = None
    promoted: bool = False
    kept_champion: bool = False
    champion_before: str | None = None
    champion_after: str | None = None
    versions_after: int | None = None
    train_seconds: Number | None = None
    pretrain_seconds: Number | None = None
    run_seconds: Number | None = None

    @classmethod
    def read(cls, path: Path) -> DayRecord:
        return cls.model_validate(read_json(path))

    def to_json(self) -> dict[str, JsonValue]:
        """The record as written (the keys it holds; NaN metrics stay NaN, as json.dumps writes them)."""
        return self.model_dump(exclude_unset=True)

    def metric(self, who: str, metric: str) -> float | None:
        """``who``'s (served | candidate) ``metric`` on the day; None when it had no model or no value."""
        model = self.served if who == "served" else self.candidate
        return model.metrics.value(metric) if model and model.metrics else None

    def scores_of(self, who: str) -> str | None:
        """``who``'s (served | candidate) scores file, relative to the recipe's folder."""
        model = self.served if who == "served" else self.candidate
        return model.scores if model else None

    def gate_call(self) -> str | None:
        """The gate's decision (records written before ``gate_decision`` was kept: the run's)."""
        return self.gate_decision if "gate_decision" in self.model_fields_set else self.decision

    def beat(self) -> bool | None:
        """The day's recorded outcome, else (records written before it was kept) from the metrics."""
        if "candidate_beat_served" in self.model_fields_set:
            return self.candidate_beat_served
        cand, served = self.metric("candidate", "save_hit_at_3"), self.metric("served", "save_hit_at_3")
        return None if cand is None or served is None else cand > served

    @property
    def failed(self) -> bool:
        """The day's run exited neither 0 nor 1 (it broke, as opposed to a reject)."""
        return self.exit_code not in (0, 1)


def day_fingerprint(previous: str | None, day: dt.date, config: str, code: str, window: str | None) -> str:
    """The day's fingerprint, chained over the previous day's: a recorded day is reused only while it
    and every day before it match."""
    body = json.dumps([previous, day.isoformat(), config, code, window])
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def champion_of(home: Path) -> tuple[str | None, str | None]:
    """The recipe registry's champion and the last day its training window held (its train
    record's ``train_end``; None, None: no champion yet)."""
    from ranking.registry import Registry

    reg = Registry(str(home / "registry"))
    version = reg.champion()
    trained_for = reg.record(version).train.get("train_end") if version else None
    return version, trained_for if isinstance(trained_for, str) else None


def version_count(home: Path) -> int:
    """The versions in the recipe's registry."""
    from ranking.registry import Registry

    return len(Registry(str(home / "registry")).version_ids())


def step_summary(home: Path, run_id: str, step: str) -> StepSummary | None:
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


def eval_partition(shared_home: Path, day: dt.date, days: int) -> Path | None:
    """The eval partition of the ``days``-day window ending at ``day``, as its manifest names it
    (None: the window was not built). Only the eval entry's path is read, so a manifest the full
    model would refuse (a test's, an older build's) still serves its eval day."""
    path = shared_home / "windows" / f"{day.isoformat()}_{days}d" / "manifest.json"
    try:
        manifest = read_json(path)
    except (OSError, ValueError):
        return None
    return Path(manifest["eval"]["path"])


def version_metrics(home: Path, version: str | None) -> RecordedMetrics | None:
    """A registered version's offline metrics (its eval.json; None: no version, or unreadable)."""
    if not version:
        return None
    from ranking.registry import Registry

    try:  # a pydantic ValidationError is a ValueError
        return RecordedMetrics.model_validate(
            json.loads(Registry(str(home / "registry")).read_file(version, "eval.json"))
        )
    except (RankerError, ValueError):
        return None


def copy_candidate_scores(run: RecipeRun, day: dt.date, version: str | None) -> str | None:
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


def beat_served(candidate: RecordedMetrics | None, served: ServedModel | None) -> bool | None:
    """Candidate save HIT@3 above the served model's on the same eval day (None: no comparison)."""
    cand = candidate.save_hit_at_3 if candidate else None
    base = served.metrics.save_hit_at_3 if served and served.metrics else None
    if cand is None or base is None:
        return None
    return bool(cand > base)


def checkpoint_path(run: RecipeRun, version: str) -> Path:
    """A version's model checkpoint in the recipe's registry cache."""
    from ranking.registry import Registry, cache_dir

    reg = Registry(str(run.home / "registry"))
    return reg.local_dir(version, cache_dir(Workspace.resolve(run.home))) / "model.pt"
