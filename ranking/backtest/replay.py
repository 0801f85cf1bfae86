"""Replaying one day of one recipe (``replay_day``) through a ``Replayer``: the production one,
``CliReplayer``, runs ``ranker run --home <recipe home> --end <date>`` in a fresh process, the same
code path as the daily DAG (window -> train -> gate -> promote | reject -> metrics); tests script
a fake. The served model of a day is the recipe's champion *before* that day's decision; it is
scored on the day's eval partition.

Base model: a recipe that warm-starts from the base (``warm_start = "base"``, or an incremental
recipe whose full retrains start from it) gets one from ``ranker pretrain --end <day>`` before
its first day and again whenever the base is ``pretrain.every_days`` old, as the weekly
``ranker_pretrain`` DAG would; the pretraining time counts in the recipe's training time.

Day-1 rule: a recipe starts with an empty registry, so on its first day (and any later day
before its first promotion) no model is served: the day has ``served = null`` and is left out
of the served means and of the bootstrap; the report says how many days each mean covers.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, JsonValue

from ranking.backtest.day import (
    DayCandidate,
    DayPretrain,
    DayRecord,
    ForwardChoice,
    Number,
    RecordedMetrics,
    ServedModel,
    beat_served,
    champion_of,
    checkpoint_path,
    copy_candidate_scores,
    eval_partition,
    step_summary,
    version_count,
    version_metrics,
)
from ranking.backtest.spec import RecipeRun
from ranking.core import killpoints
from ranking.core.atomic import atomic_write_json
from ranking.core.lifetime import PARENT_PID_ENV
from ranking.core.summaries import GateSummary, TrainSummary
from ranking.pipeline.pretrain import uses_base

# what a replayed command printed: its --json line, parsed (read through ``CommandOutput``)
PrintedJson = dict[str, JsonValue]


class CommandOutput(BaseModel):
    """What a replayed day reads of its ``ranker run`` / ``ranker pretrain`` JSON line: the step's
    summary, or the error a failed command printed (the rest of the line is not read)."""

    version: str | None = None
    error: str | None = None
    decision: str | None = None
    failed_checks: list[str] | None = None
    promoted: bool | None = None
    kept_champion: bool | None = None
    base_range: list[str] | None = None
    duration_seconds: Number | None = None


# environment a replayed day must not inherit: it would point the run at production state
_ISOLATE_ENV = (
    "RANKER_REGISTRY",
    "RANKER_CONFIG",
    "RANKER_PUSHGATEWAY_URL",
    "RANKER_HOME",
    "RANKER_MLFLOW_TRACKING_URI",
)


class Replayer(Protocol):
    """What a replayed day needs from the pipeline (a subprocess ``ranker run`` in production;
    tests substitute a fake to check the bookkeeping)."""

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, PrintedJson]:
        """``ranker run --end day`` in ``home``: (exit code, the run's summary)."""
        ...

    def score(self, checkpoint: Path, eval_parquet: Path) -> Any:
        """Scores frame (request_id, pin_id, saved, score) of a checkpoint on an eval partition."""
        ...

    def run_pretrain(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, PrintedJson]:
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

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, PrintedJson]:
        return self._ranker("run", home, day, run_id, log_path, self.run_args)

    def run_pretrain(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, PrintedJson]:
        return self._ranker("pretrain", home, day, run_id, log_path)

    def _ranker(
        self,
        command: str,
        home: Path,
        day: dt.date,
        run_id: str,
        log_path: Path,
        extra: tuple[str, ...] = (),
    ) -> tuple[int, PrintedJson]:
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
        summary: PrintedJson = {}
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


def base_is_due(config: Any, day: dt.date, base_train_end: str | None) -> bool:
    """No base yet, or the current one was made ``pretrain.every_days`` or more days before ``day``
    (a base made for day X ends its range ``window.days + pretrain.gap_days`` before X)."""
    if base_train_end is None:
        return True
    made_for = dt.date.fromisoformat(base_train_end) + dt.timedelta(
        days=config.window.days + config.pretrain.gap_days
    )
    return (day - made_for).days >= config.pretrain.every_days


def _maybe_pretrain(run: RecipeRun, day: dt.date, replayer: Replayer) -> DayPretrain | None:
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
    code, printed = replayer.run_pretrain(
        run.home, day, run_id, run.folder / "days" / f"{day.isoformat()}-pretrain.log"
    )
    summary = CommandOutput.model_validate(printed)
    return DayPretrain(
        exit_code=code,
        version=summary.version,
        base_range=summary.base_range,
        error=summary.error if code != 0 else None,
        # the pretrain's own duration (as train_seconds is the train step's), else the wall time here
        seconds=summary.duration_seconds or round(time.perf_counter() - started, 3),
    )


def forward_choice(
    run: RecipeRun,
    previous: DayRecord | None,
    served: ServedModel,
    eval_parquet: Path,
    replayer: Replayer,
) -> ForwardChoice | None:
    """The day before's gate choice seen on this day's impressions (ranking/backtest/gates.py has the
    timeline): the fresh candidate ``c_{D-1}`` and the other model of that choice (the replaced
    champion if it was promoted, else ``c_{D-1}`` itself), each with its save HIT@3 here; the one
    not served today is scored once more. None on the first day or without a candidate yesterday."""
    from ranking.evaluation.scores import metrics_of

    fresh = previous.candidate.version if previous and previous.candidate else None
    if not fresh:
        return None
    served_hit = served.metrics.save_hit_at_3 if served.metrics else None
    promoted = served.version == fresh
    other = previous.champion_before if previous and promoted else fresh

    def hit(version: str | None) -> Number | None:
        if version is None:
            return None
        if version == served.version:
            return served_hit
        return float(metrics_of(replayer.score(checkpoint_path(run, version), eval_parquet)).save_hit_at_3)

    return ForwardChoice(
        fresh=fresh,
        promoted_fresh=promoted,
        fresh_save_hit_at_3=hit(fresh),
        other=other,
        other_save_hit_at_3=hit(other),
    )


def replay_day(
    run: RecipeRun,
    day: dt.date,
    fingerprint: str,
    replayer: Replayer,
    shared_home: Path,
    previous: DayRecord | None = None,
) -> DayRecord:
    """Replay one day of one recipe and return its record (also written to ``days/<date>.json``);
    ``previous``: the day before's record (its gate choice is scored on this day for the regret)."""
    from ranking.evaluation.scores import write_scores

    started = time.perf_counter()
    pretrained = _maybe_pretrain(run, day, replayer)
    champion, trained_for = champion_of(run.home)
    attempt = len(list((run.home / "pipeline").glob(f"backtest__{day.isoformat()}__*"))) + 1
    run_id = f"backtest__{day.isoformat()}__{attempt}"
    exit_code, printed = replayer.run_day(
        run.home, day, run_id, run.folder / "days" / f"{day.isoformat()}.log"
    )
    summary = CommandOutput.model_validate(printed)
    trained = step_summary(run.home, run_id, "train")
    train = trained if isinstance(trained, TrainSummary) else None
    judged = step_summary(run.home, run_id, "gate")
    gate = judged if isinstance(judged, GateSummary) else None  # a gate that failed judged nothing
    version = summary.version or (train.version if train else None)

    served: ServedModel | None = None
    if champion is not None:
        eval_parquet = eval_partition(shared_home, day, run.effective.config.window.days)
        served = ServedModel(
            version=champion,
            trained_for=trained_for,
            age_days=(day - dt.date.fromisoformat(trained_for)).days if trained_for else None,
            metrics=None,
        )
        if eval_parquet is not None:
            from ranking.evaluation.scores import metrics_of

            scores = replayer.score(checkpoint_path(run, champion), eval_parquet)
            write_scores(run.served_scores_path(day), scores)
            served.metrics = RecordedMetrics.model_validate(metrics_of(scores).to_dict())
            served.scores = str(run.served_scores_path(day).relative_to(run.folder))
            served.forward = forward_choice(run, previous, served, eval_parquet, replayer)

    after, _ = champion_of(run.home)
    candidate_metrics = version_metrics(run.home, version)
    candidate_scores = copy_candidate_scores(run, day, version)
    record = DayRecord(
        day=day.isoformat(),
        fingerprint=fingerprint,
        run_id=run_id,
        exit_code=exit_code,
        error=summary.error if exit_code not in (0, 1) else None,
        served=served,
        candidate=DayCandidate(version=version, metrics=candidate_metrics, scores=candidate_scores)
        if version
        else None,
        pretrain=pretrained,
        decision=summary.decision,
        # the gate judged by the outcome: did the candidate beat the served model on this eval day?
        gate_decision=gate.decision if gate else None,
        candidate_beat_served=beat_served(candidate_metrics, served),
        failed_checks=summary.failed_checks or (gate.failed_checks if gate else []),
        relative_change=gate.relative_change if gate else None,
        gate_ci=list(gate.ci) if gate and gate.ci is not None else None,
        promoted=bool(summary.promoted),
        kept_champion=bool(summary.kept_champion),
        champion_before=champion,
        champion_after=after,
        versions_after=version_count(run.home),
        train_seconds=train.duration_seconds if train else None,
        pretrain_seconds=pretrained.seconds if pretrained else None,
        run_seconds=round(time.perf_counter() - started, 3),
    )
    atomic_write_json(run.day_path(day), record.to_json())
    killpoints.reached("replay:day-recorded")
    return record
