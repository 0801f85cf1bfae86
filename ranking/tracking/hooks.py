"""Where a run finishes, it is sent to MLflow here: the run's files read into the typed inputs of
:mod:`ranking.tracking.builders`, the record built and handed to
:func:`ranking.tracking.client.track` (which queues it when MLflow is down). Every caller goes
through :func:`send`, once per run; nothing here fails the run it tracks.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ranking.core.results import CommandResult
from ranking.core.summaries import StepError, TrackSummary, TrainSummary, parse_summary
from ranking.tracking.builders import RetrainFolder, partitions_sha, retrain_decision, retrain_record

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.core.workspace import Workspace
    from ranking.tracking.builders import PretrainFacts
    from ranking.tracking.client import TrackingRef
    from ranking.tracking.records import TrackingRecord
    from ranking.tracking.settings import TrackingSettings
    from ranking.trainer.reports.curve_data import TrainingCurve

log = logging.getLogger(__name__)

# what a training run folder holds that a person opens, beside the model
RUN_DIR_ARTIFACTS = ("report.md", "curve.png", "slices.png", "training_curve.json", "effective_config.json")
# the steps of a retrain whose summaries are its record's inputs and artifacts, in pipeline order
RETRAIN_STEPS = ("window", "validate", "train", "gate", "decide", "promote", "reject", "metrics")


def send(record: TrackingRecord, settings: TrackingSettings, *, say: bool = True) -> TrackingRef | None:
    """Send ``record`` (queued when MLflow is down); its one line logged (``say``; the track
    step's line is its text instead). None: tracking is off, or something of ours broke (logged:
    a run is never failed by its tracking)."""
    if not settings.enabled:
        return None
    from ranking.tracking.outbox import track

    try:
        ref = track(record, settings)
    except Exception as exc:  # track() never raises for MLflow; anything else is a bug, not the run's failure
        log.warning("MLflow: %s not tracked (%s: %s)", record.record_id, type(exc).__name__, exc)
        return None
    ref = ref.model_copy(update={"message": where(ref, settings)})
    if say or ref.queued:
        (log.warning if ref.queued else log.info)("MLflow: %s", ref.message)
    return ref


def where(ref: TrackingRef, settings: TrackingSettings) -> str:
    """The ref's line, and how to open a run logged to a local store (no UI link to give)."""
    if ref.queued or ref.url or not settings.local or ref.run_id is None:
        return ref.message
    return (
        f"{ref.message}; local store {settings.uri} (browse: .venv-mlflow/bin/mlflow ui"
        f" --backend-store-uri {settings.uri})"
    )


def settings_for(home: Path, effective: EffectiveConfig | None) -> TrackingSettings:
    from ranking.tracking.settings import tracking_settings

    return tracking_settings(home, effective)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


# ------------------------------------------------------------------------------------------
# reading a run's files
# ------------------------------------------------------------------------------------------


class _Partition(BaseModel):
    model_config = ConfigDict(extra="ignore")

    date: dt.date
    sha256: str | None = None


class _Manifest(BaseModel):
    """The part of a window manifest that names its data."""

    model_config = ConfigDict(extra="ignore")

    train: list[_Partition]
    eval: _Partition


def manifest_sha(manifest: str | Path | None) -> str | None:
    """The window's partitions hash (:func:`~ranking.tracking.builders.partitions_sha`) from its
    manifest; None when it is gone or records no hashes."""
    if not manifest:
        return None
    try:
        parsed = _Manifest.model_validate_json(Path(manifest).read_bytes())
    except (OSError, ValidationError):
        return None
    return partitions_sha((p.date, p.sha256) for p in (*parsed.train, parsed.eval))


def read_curve(run_dir: str | Path | None) -> TrainingCurve | None:
    from ranking.core.errors import RankerError
    from ranking.trainer.reports.curve_data import read_training_curve

    if not run_dir:
        return None
    try:
        return read_training_curve(Path(run_dir))
    except RankerError as exc:
        log.warning("MLflow: the per-epoch losses stand for the curve: %s", exc)
        return None


def read_effective(path: str | Path | None) -> dict[str, Any] | None:
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_dir_artifacts(run_dir: str | Path | None) -> list[str]:
    if not run_dir:
        return []
    folder = Path(run_dir).resolve()
    return [str(folder / name) for name in RUN_DIR_ARTIFACTS if (folder / name).is_file()]


class Outcome(Protocol):
    """The run so far (``ranking.pipeline.graph.RunOutcome``, above this package: read by shape)."""

    status: Literal["success", "failed"]
    failed_step: str | None


def read_retrain_folder(
    folder: Path, run_id: str, outcome: Outcome | None, now: Callable[[], float] = time.time
) -> RetrainFolder:
    """A pipeline run folder as a :class:`RetrainFolder`; a summary that does not parse is left
    out (named in the log), never a reason not to track the run."""
    found: dict[str, Any] = {}
    errors: dict[str, StepError] = {}
    starts: list[float] = []
    summaries: list[str] = []
    for step in RETRAIN_STEPS:
        path = folder / f"{step}.json"
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
            summary = parse_summary(data, step)
        except (OSError, ValueError) as exc:  # torn, or not the step's model (ValidationError)
            log.warning("MLflow: %s left out of the run's record (%s)", path, str(exc).splitlines()[0])
            continue
        summaries.append(str(path.resolve()))
        duration = data.get("duration_seconds") if isinstance(data, dict) else None
        starts.append(path.stat().st_mtime - (duration if isinstance(duration, int | float) else 0.0))
        if isinstance(summary, StepError):
            errors[step] = summary
        else:
            found[step] = summary
    train = found.get("train")
    run_dir = train.run_dir if isinstance(train, TrainSummary) else None
    effective = read_effective(train.effective_config) if isinstance(train, TrainSummary) else None
    window = found.get("window")
    manifest = train.window.manifest if isinstance(train, TrainSummary) else getattr(window, "manifest", None)
    end = now()
    status = outcome.status if outcome is not None else ("failed" if errors else "success")
    return RetrainFolder(
        run_id=run_id,
        status=status,
        failed_step=outcome.failed_step if outcome is not None else None,
        window=window,
        validate_=found.get("validate"),
        train=train,
        gate=found.get("gate"),
        decide=found.get("decide"),
        promote=found.get("promote"),
        reject=found.get("reject"),
        errors=errors,
        curve=read_curve(run_dir),
        effective=effective,
        partitions_sha=manifest_sha(manifest),
        artifacts=[*run_dir_artifacts(run_dir), *summaries],
        start_ms=_ms(min(starts)) if starts else None,
        end_ms=_ms(end),
    )


# ------------------------------------------------------------------------------------------
# the runs
# ------------------------------------------------------------------------------------------


def track_retrain(
    ws: Workspace, effective: EffectiveConfig, run_id: str, registry_url: str, run: Outcome
) -> CommandResult[TrackSummary]:
    """The graph's ``track`` step: the pipeline run ``run_id`` as one MLflow run
    (``retrain:<run id>``). Exit 0 whatever MLflow said: a queued or failed send is told in the
    summary and the log."""
    try:
        settings = settings_for(ws.root, effective)
    except (ValueError, ValidationError) as exc:
        return _tracked(None, None, None, f"not tracked: the [tracking] settings are not usable ({exc})")
    if not settings.enabled:
        return _tracked(None, None, None, "not tracked: [tracking] enabled = false")
    try:
        folder = read_retrain_folder(ws.pipeline / run_id, run_id, run)
        record = retrain_record(folder)
    except Exception as exc:  # a record we could not build (any cause): said, never the run's failure
        log.warning("MLflow: run %s not tracked: %s", run_id, exc)
        return _tracked(None, None, None, f"not tracked: {exc}")
    decision = retrain_decision(folder)[0]
    ref = send(record, settings, say=False)
    if ref is None:
        return _tracked(record, None, decision, f"not tracked: run {run_id} (see the log)")
    message = ref.message
    version = record.tags.get("ranker.version")
    if decision in PROMOTED_DECISIONS and version:
        # mirrored here, after the run is logged, so the model version links to the run that made it
        # (the promote step ran before this run existed in MLflow); queued behind it when MLflow is down
        message += "; " + _mirror(registry_url, settings, version)
    return _tracked(record, ref, decision, message)


PROMOTED_DECISIONS = frozenset({"promoted", "promoted-forced"})


def _mirror(registry: str, settings: TrackingSettings, version: str) -> str:
    from ranking.tracking.outbox import mirror_champion

    try:
        return mirror_champion(registry, settings, [version])
    except Exception as exc:  # the alias is a mirror: `ranker tracking sync` mends it, the run goes on
        log.warning("MLflow: champion alias not updated: %s", exc)
        return f"champion alias not updated ({exc}); `ranker tracking sync` mends it"


def _tracked(
    record: TrackingRecord | None, ref: TrackingRef | None, decision: str | None, message: str
) -> CommandResult[TrackSummary]:
    summary = TrackSummary(
        record_id=record.record_id if record is not None else None,
        experiment=record.experiment if record is not None else None,
        mlflow_run_id=ref.run_id if ref is not None else None,
        url=ref.url if ref is not None else None,
        queued=bool(ref is not None and ref.queued),
        decision=decision,
        message=message,
    )
    return CommandResult(summary, text=message)


def track_train(
    ws: Workspace,
    effective: EffectiveConfig | None,
    train: TrainSummary,
    *,
    started: float,
    experiment: str | None = None,
    record_id: str | None = None,
    run_name: str | None = None,
) -> TrackingRef | None:
    """A training run that is a run of its own (``ranker train``; ``ranker pretrain``'s base with
    ``experiment``/``record_id``): sent once it finished."""
    from ranking.tracking.builders import TRAIN_EXPERIMENT, train_record

    try:
        settings = settings_for(ws.root, effective)
        run_dir = Path(train.run_dir)
        record = train_record(
            train,
            run_name=run_name or run_dir.name,
            curve=read_curve(run_dir),
            effective=read_effective(train.effective_config),
            partitions=manifest_sha(train.window.manifest),
            artifacts=run_dir_artifacts(run_dir),
            experiment=experiment or TRAIN_EXPERIMENT,
            record_id=record_id,
            start_ms=_ms(started),
            end_ms=_ms(time.time()),
        )
    except Exception as exc:  # as in track_retrain: never the run's failure
        log.warning("MLflow: training run %s not tracked: %s", train.run_dir, exc)
        return None
    return send(record, settings)


def step_summaries(folder: Path, steps: Iterable[str]) -> list[str]:
    """The recorded summaries of ``steps`` in a pipeline run folder (artifacts)."""
    return [str((folder / f"{s}.json").resolve()) for s in steps if (folder / f"{s}.json").is_file()]


def track_pretrain(
    ws: Workspace,
    effective: EffectiveConfig | None,
    pretrain: PretrainFacts,
    train: TrainSummary | None,
    *,
    started: float,
) -> TrackingRef | None:
    """``ranker pretrain`` (and the first base ``ranker run`` trains): sent once it finished."""
    from ranking.tracking.builders import pretrain_record

    try:
        settings = settings_for(ws.root, effective)
        run_dir = Path(train.run_dir) if train is not None else None
        record = pretrain_record(
            pretrain,
            train,
            curve=read_curve(run_dir),
            effective=read_effective(train.effective_config) if train is not None else None,
            partitions=manifest_sha(train.window.manifest) if train is not None else None,
            artifacts=run_dir_artifacts(run_dir),
            start_ms=_ms(started),
            end_ms=_ms(time.time()),
        )
    except Exception as exc:  # as in track_retrain: never the run's failure
        log.warning("MLflow: pretrain %s not tracked: %s", pretrain.run_id, exc)
        return None
    return send(record, settings)


def send_family(
    parent: TrackingRecord, children: Iterable[TrackingRecord], settings: TrackingSettings
) -> TrackingRef | None:
    """A parent (a backtest, a review) then its children (the days). A parent that was queued
    queues its children at once: each would otherwise wait for MLflow again, one timeout a day."""
    ref = send(parent, settings)
    if ref is None:
        return None
    from ranking.tracking.queue import enqueue_record

    sent = queued = 0
    for child in children:
        try:
            if ref.queued:
                got = enqueue_record(child, settings, f"its parent {parent.record_id} is queued")
            else:
                from ranking.tracking.outbox import track

                got = track(child, settings)
        except Exception as exc:  # as in send: never the run's failure
            log.warning("MLflow: %s not tracked (%s: %s)", child.record_id, type(exc).__name__, exc)
            continue
        queued += got.queued
        sent += not got.queued and got.run_id is not None
    log.info("MLflow: %s: %d child run(s) sent, %d queued", parent.record_id, sent, queued)
    return ref
