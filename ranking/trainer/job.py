"""One ``ranker train`` job: a typed request in, the step summary out.

:func:`run_train_job` is the whole command. It resolves the window, the warm start (a checkpoint,
the registry's champion, or none) and the model config, then trains here (CPU or one GPU) or,
with ``nproc > 1``, launches the same job under torchrun (``torch.distributed.run``, gloo on CPU,
nccl on GPU) and relays rank 0's summary; last it registers the run. The workers get the job
itself, serialized into the run folder (:func:`job_to_json`, ``ranking.trainer.worker``), not a
command line. Launched by an external ``torchrun -m ranking.cli train ...`` (multi-node) every
rank trains and rank 0 reports.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import PlainSerializer, PlainValidator, TypeAdapter, ValidationError

from ranking.core.errors import RankerError, TrainingFailed
from ranking.core.ids import validate_run_id
from ranking.core.summaries import Phase, TrainSummary
from ranking.core.workspace import Workspace
from ranking.trainer.models.config import ModelConfig, OptimizerConfig, TrainConfig

if TYPE_CHECKING:
    from features.window import WindowManifest
    from ranking.core.summaries import DataValidation
    from ranking.trainer.lineage import TrainingPlan

log = logging.getLogger(__name__)

MAX_NPROC = 64
LAUNCH_SUMMARY = ".launch-summary.json"  # in the run folder: rank 0 of a launched job writes it
WORKER_JOB = ".worker-job.json"  # in the run folder: the job every launched worker runs


def _workspace(value: object) -> Workspace:
    return value if isinstance(value, Workspace) else Workspace(Path(str(value)))


# a job's workspace travels to a launched worker as its root folder
WorkspaceRoot = Annotated[
    Workspace, PlainValidator(_workspace), PlainSerializer(lambda ws: str(ws.root), return_type=str)
]


@dataclass(frozen=True)
class TrainJob:
    """Everything ``ranker train`` was asked to do. What the recipe decides has no default here:
    a job is built from the pipeline config (``ranking.config.requests.train_job``), whose
    ``[recipe]`` and ``[window]`` hold each default once."""

    workspace: WorkspaceRoot
    end: dt.date  # window end (exclusive): the eval day
    days: int
    schedule: str  # a name (delayed, joint, ...) or an explicit list such as F,J,J
    epochs: int | None  # None: DEFAULT_EPOCHS (ranking.trainer.schedule), or the list's length
    pipeline: str
    warm_start: str  # a checkpoint path (file or run folder) | champion | base | none
    warm_start_scope: str  # "all" | "dense"
    warm_start_optimizer: bool  # carry the tables' optimizer state (row-wise Adagrad sums)
    # incremental: continue the champion on the days after its window (ranking.trainer.lineage),
    # a full retrain from full_retrain_warm_start every full_retrain_every_days days
    incremental: bool
    full_retrain_every_days: int | None
    full_retrain_warm_start: str
    remedy: str  # "none" | "meda" (ranking.trainer.remedies)
    seed: int
    batch_size: int  # global
    model_config: Path | None  # ModelConfig as JSON or YAML (None: the built-in one)
    # the model reads the history views' columns too (the built-in model's dense features; a
    # model_config file or a warm start must agree: resolve_model_config)
    history_features: bool
    # the pipeline config's optimizers: they replace the model config's (a warm start's included)
    table_optimizer: OptimizerConfig | None
    dense_optimizer: OptimizerConfig | None
    # how this job runs (not the recipe's)
    shuffle_buffer: int = TrainConfig.shuffle_buffer_rows  # rows per rank
    train_since: dt.date | None = None  # set for launched workers: the plan's first training day
    out: Path | None = None  # run folder (None: <home>/runs/<run id>)
    run_id: str | None = None
    resume: bool = False
    nproc: int = 1
    threads: int | None = None  # CPU threads per process (None: $OMP_NUM_THREADS, else 1)
    eval_each_epoch: bool = True
    register: bool = True
    progress: bool = True
    summary_file: Path | None = None  # set for launched workers: rank 0 writes its summary here
    # the effective pipeline config and each value's source, recorded in the run folder
    # (provenance of the job, not part of what it asks for: left out of equality)
    effective_config: dict[str, Any] | None = field(
        default=None, compare=False
    )  # EffectiveConfig.to_dict(), recorded as is


def run_train_job(job: TrainJob) -> TrainSummary | None:
    """Run the job; the ``train`` step summary, or None where this process reports nothing (a
    non-zero rank, or a launched worker whose summary goes to its launcher)."""
    from ranking.trainer.distributed.setup import launched_by_torchrun
    from ranking.trainer.schedule import resolve_schedule

    started = time.perf_counter()
    # OpenMP reads OMP_NUM_THREADS when torch loads (nothing here has imported it yet). On the
    # shared 2-core box one thread ran 31k samples/s, two 4-7k, torch's default 0.5-1k
    # (docs/training.md): default 1 unless the caller set OMP_NUM_THREADS or --threads.
    job = replace(job, threads=job.threads or _env_threads() or 1)
    os.environ["OMP_NUM_THREADS"] = str(job.threads)
    schedule = resolve_schedule(job.schedule, job.epochs)
    if job.nproc > 1 and not launched_by_torchrun():
        # before anything is read or started: more workers than the machine runs would start
        # them all and fail minutes later
        check_nproc(job.nproc, *machine_processes())
    run_dir = run_folder(job)
    if job.summary_file is not None and job.summary_file.resolve().parent != run_dir:
        raise RankerError("--summary-file must lie in the run folder")
    if launched_by_torchrun():  # every rank of one job: the launcher (or the operator) holds it
        return _train_in(job, run_dir, schedule, started)
    with run_folder_lock(run_dir):
        return _train_in(job, run_dir, schedule, started)


def run_folder_lock(run_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Hold ``run_dir`` for this job: a second ``ranker train`` into the same folder (the same
    ``--run-id`` or ``--out``) while one trains is refused in one line, instead of both writing
    its checkpoints and registering two versions. The lock file lies beside the folder, so the
    folder stays the run's own."""
    from ranking.core.locks import held_or_refused

    path = run_dir.parent / f".{run_dir.name}.train.lock"
    return held_or_refused(
        path,
        f"run folder {run_dir} is in use by another training job (it holds {path}): wait"
        " for it to finish, or train into another --out / --run-id",
    )


def _train_in(
    job: TrainJob, run_dir: Path, schedule: tuple[Phase, ...], started: float
) -> TrainSummary | None:
    from features.window import read_window_manifest
    from ranking.trainer.distributed.setup import launched_by_torchrun

    manifest = read_window_manifest(job.workspace.window_manifest(job.end, job.days))
    validation = window_validation(job.workspace, job.end, job.days, manifest.window_id)
    plan = training_plan(job)
    since = job.train_since or plan.since
    if since is not None:
        manifest = days_since(manifest, since)
    warm, source = resolve_warm_start(job.workspace, plan.warm_start)

    if job.nproc > 1 and not launched_by_torchrun():
        from ranking.trainer.datasets.window import validate_window

        # user errors surface here as one line, not as N failed workers
        validate_window(manifest, resolve_model_config(job, run_dir, warm), _feature_version())
        launched = _launch(replace(job, train_since=since), run_dir, warm)
        summary = launched.model_copy(
            update={"warm_start": launched.warm_start.model_copy(update={"source": source})}
        )
    else:
        from ranking.trainer.loop import TrainRequest, run_training
        from ranking.trainer.models.config import TrainConfig

        trained = run_training(
            TrainRequest(
                manifest=manifest,
                model_config=resolve_model_config(job, run_dir, warm),
                train_config=TrainConfig(
                    schedule=schedule,
                    schedule_spec=job.schedule,
                    pipeline=job.pipeline,
                    batch_size=job.batch_size,
                    shuffle_buffer_rows=job.shuffle_buffer,
                    seed=job.seed,
                    eval_each_epoch=job.eval_each_epoch,
                    remedy=job.remedy,
                ),
                run_dir=run_dir,
                warm_start=warm,
                warm_start_source=source,
                warm_start_scope=job.warm_start_scope,
                warm_start_optimizer=job.warm_start_optimizer,
                resume=job.resume,
                expected_feature_version=_feature_version(),
                progress=job.progress,
                threads=job.threads,
            )
        )
        if trained is None:  # a non-zero rank: rank 0 reports
            return None
        if job.summary_file is not None:
            from ranking.core.atomic import atomic_write_json

            atomic_write_json(job.summary_file, trained.body())
            return None
        summary = trained

    from ranking.core.atomic import atomic_write_json
    from ranking.trainer.loop import TRAIN_MANIFEST_FILE, TrainManifest

    if (run_dir / TRAIN_MANIFEST_FILE).is_file():
        # the registry keeps them with the version; the gate reads them
        TrainManifest.read(run_dir).with_provenance(
            plan.lineage, validation, review_source(job.effective_config)
        ).write(run_dir)
    summary = summary.model_copy(update={"lineage": plan.lineage, "data_validation": validation})
    if job.effective_config is not None:
        effective = run_dir / "effective_config.json"
        atomic_write_json(effective, job.effective_config)
        summary = summary.model_copy(update={"effective_config": str(effective)})
    summary = summary.model_copy(update={"version": None, "duration_seconds": time.perf_counter() - started})
    if job.register:
        from ranking.registry import register_run
        from ranking.registry.retention import REGISTERED_FILE

        # kept before registering: an attempt killed between the registration and its train.json
        # is resumed from it (ranking.pipeline.run.prepare_rerun), not trained and registered again
        atomic_write_json(run_dir / TRAIN_SUMMARY_FILE, summary.body())
        summary = summary.model_copy(update={"version": register_run(job.workspace, run_dir, job.run_id)})
        # what [retention] reads before it prunes the folder: the registry holds its model
        atomic_write_json(run_dir / REGISTERED_FILE, {"version": summary.version})
    return summary


TRAIN_SUMMARY_FILE = "train_summary.json"  # in the run folder: the summary before registration


def run_folder(job: TrainJob) -> Path:
    """``out``, else ``<home>/runs/<run id>`` (default id: window and start time); refused when
    something other than a folder is there."""
    if job.out is not None:
        folder = job.out.expanduser().resolve()
    else:
        run_id = job.run_id or f"{job.end.isoformat()}_{job.days}d-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
        folder = job.workspace.runs / validate_run_id(run_id)
    if folder.exists() and not folder.is_dir():
        raise RankerError(
            f"run folder {folder} is a file, not a folder: give --out a folder (new or a run's)"
        )
    return folder


def training_plan(job: TrainJob) -> TrainingPlan:
    """Full or incremental (ranking.trainer.lineage), from what the registry says of the champion."""
    from ranking.trainer.lineage import champion_info, plan_training

    champion = None
    if job.incremental:
        from ranking.registry import Registry

        reg = Registry.for_workspace(job.workspace)
        version = reg.champion()
        if version is not None:
            champion = champion_info(version, reg.record(version).train)
            if champion is None:
                raise RankerError(f"incremental: champion {version} does not record its training window")
    return plan_training(
        end=job.end,
        warm_start=job.warm_start,
        incremental=job.incremental,
        full_retrain_every_days=job.full_retrain_every_days,
        full_retrain_warm_start=job.full_retrain_warm_start,
        champion=champion,
    )


def days_since(manifest: WindowManifest, since: dt.date) -> WindowManifest:
    """The window's training days from ``since`` on (an incremental run's data)."""
    kept = tuple(p for p in manifest.train if p.date >= since)
    if not kept:
        raise RankerError(f"incremental: the window {manifest.path} has no training day on or after {since}")
    return manifest.model_copy(update={"train": kept})


def review_source(effective_config: dict[str, Any] | None) -> str | None:  # the record above
    """The review whose recipe the run trained (``review:<id>:<recipe>``, the source of its
    ``[recipe]`` keys under ``[review] recipe = "auto"``), or None: a first candidate of a review's
    switch is expected to differ from the champion by more than a day's noise."""
    sources = (effective_config or {}).get("sources") or {}
    found = sorted(
        {str(v) for k, v in sources.items() if k.startswith("recipe.") and str(v).startswith("review:")}
    )
    return found[0] if found else None


def window_validation(ws: Workspace, end: dt.date, days: int, window_id: str) -> DataValidation | None:
    """The window's recorded data validation, or None when it was not validated (or validated as
    another build of the window). A window whose validation failed is refused in one line: the
    run stops at the validation step, and a standalone train must not go around it."""
    from features.validation.step import read_result
    from ranking.core.summaries import DataValidation

    result = read_result(ws, end, days)
    if result is None or result.window_id != window_id:
        log.info("window %s (%dd) has no data validation of this build: training without one", end, days)
        return None
    if result.verdict == "fail":
        first = next(a for a in result.anomalies if a.policy == "fail")
        raise RankerError(
            f"the window {end} ({days}d) failed its data validation ({first.kind}"
            f"{' ' + first.feature if first.feature else ''}: {first.detail}); see {result.report}, fix the"
            f" data or accept the anomaly (`ranker features accept --anomaly {first.key} --reason ...`) and"
            " validate again"
        )
    return DataValidation(
        verdict=result.verdict,
        window_id=result.window_id,
        leak_checked=result.leak_checked,
        leak_clean=result.leak_clean,
        counts=result.counts,
        accepted=[a.key for a in result.anomalies if a.policy == "accepted"],
        report=result.report,
    )


def resolve_warm_start(ws: Workspace, value: str) -> tuple[Path | None, str]:
    """(checkpoint or None, source: none | champion | base | path | a none-yet note)."""
    if value == "none":
        return None, "none"
    if value in ("champion", "base"):
        from ranking.registry import alias_checkpoint

        found = alias_checkpoint(ws, value)
        if found is None:
            log.info("no %s yet: training from scratch", value)
            return None, f"{value} (none yet: from scratch)"
        return found[1], f"{value} {found[0]}"
    path = Path(value).expanduser().resolve()
    if path.is_dir():
        path = path / "model.pt"
    if not path.is_file():
        raise RankerError(
            f"--warm-start: no checkpoint at {path} (give a path, 'champion', 'base' or 'none')"
        )
    return path, "path"


def resolve_model_config(job: TrainJob, run_dir: Path, warm: Path | None) -> ModelConfig:
    """The job's config file, else the resumed run's, else the warm start's, else the default;
    with the job's optimizers (not part of the architecture) in place of its own. Refused in one
    line, before anything is written, where it disagrees with ``history_features`` or where the
    warm start reads other dense features than the model it would start (instead of a shape
    error when its weights load)."""
    config = _base_model_config(job, run_dir, warm)
    return replace(
        config,
        table_optimizer=job.table_optimizer or config.table_optimizer,
        dense_optimizer=job.dense_optimizer or config.dense_optimizer,
    )


def _base_model_config(job: TrainJob, run_dir: Path, warm: Path | None) -> ModelConfig:
    from ranking.trainer.models.config import default_model_config, load_model_config, reads_history

    theirs = _warm_model_config(warm)
    if job.model_config is not None:
        config = load_model_config(job.model_config)
        _check_file_history(job.model_config, config, job.history_features)
        if theirs is not None:
            _check_warm_dense(job, warm, theirs, config.dense_features, f"model file {job.model_config}")
        return config
    if job.resume and (run_dir / "model_config.json").is_file():
        resumed = load_model_config(run_dir / "model_config.json")
        if reads_history(resumed) != job.history_features:
            raise RankerError(
                f"--resume: the run in {run_dir} trains a model {_with_or_without(reads_history(resumed))}"
                f" the history features, but the recipe asks history_features ="
                f" {str(job.history_features).lower()}: resume it with the recipe it started with, or"
                " train into another --out"
            )
        return resumed
    wanted = default_model_config(history_features=job.history_features)
    if theirs is not None:
        _check_warm_history(job, warm, theirs, wanted.dense_features)
        return theirs  # the warm start's architecture (it may be a model file's)
    return wanted


def _warm_model_config(warm: Path | None) -> ModelConfig | None:
    if warm is None:
        return None
    from ranking.trainer.checkpointing.checkpoint import checkpoint_meta
    from ranking.trainer.evaluation.scoring import model_config_of

    # the config alone (the tables are rebuilt, and the file verified, when training loads it)
    return model_config_of(warm, checkpoint_meta(warm))


def _with_or_without(history: bool) -> str:
    return "with" if history else "without"


def _check_file_history(path: Path, config: ModelConfig, history_features: bool) -> None:
    """A model file names its own dense features; the recipe's history_features must say the same
    (so a recipe never claims the history without the model reading it, or the other way)."""
    from ranking.trainer.models.config import reads_history

    if reads_history(config) == history_features:
        return
    if history_features:
        raise RankerError(
            f"recipe.history_features = true, but model file {path} reads no history feature"
            " (its dense_features name none of features.schema.HISTORY_FEATURES): add them to the"
            " file, or set history_features = false"
        )
    raise RankerError(
        f"model file {path} reads history features, but recipe.history_features = false: set"
        " history_features = true (the window must then carry them), or drop them from the file"
    )


def _check_warm_history(
    job: TrainJob, warm: Path | None, theirs: ModelConfig, wanted: tuple[str, ...]
) -> None:
    """A warm start (champion, base, a path) trained with or without the history features as the
    recipe asks: its dense layers' input width is the number of dense features."""
    from ranking.trainer.models.config import reads_history

    if reads_history(theirs) == job.history_features:
        return
    raise RankerError(
        f"warm start {job.warm_start} ({warm}) was trained {_with_or_without(reads_history(theirs))}"
        f" the history features ({len(theirs.dense_features)} dense features), but the recipe asks"
        f" history_features = {str(job.history_features).lower()} ({len(wanted)}): retrain the base"
        " with the same setting (ranker pretrain inherits recipe.history_features), or warm-start"
        " from a model trained with it, or set warm_start = none"
    )


def _check_warm_dense(
    job: TrainJob, warm: Path | None, theirs: ModelConfig, wanted: tuple[str, ...], what: str
) -> None:
    if tuple(theirs.dense_features) == tuple(wanted):
        return
    extra = [f for f in wanted if f not in theirs.dense_features]
    missing = [f for f in theirs.dense_features if f not in wanted]
    raise RankerError(
        f"warm start {job.warm_start} ({warm}) reads {len(theirs.dense_features)} dense features,"
        f" {what} {len(wanted)} (new: {extra[:3]}{'...' if len(extra) > 3 else ''}, gone:"
        f" {missing[:3]}{'...' if len(missing) > 3 else ''}): retrain the base with the same model"
        " file (ranker pretrain inherits recipe.model_file), or warm-start from a model trained with"
        " it, or set warm_start = none"
    )


def worker_job(job: TrainJob, run_dir: Path, warm: Path | None) -> TrainJob:
    """What each torchrun worker runs: the same training with everything resolved, one process
    each, nothing registered; rank 0 hands its summary back through a file in the run folder."""
    return replace(
        job,
        warm_start=str(warm) if warm is not None else "none",
        incremental=False,  # the launcher planned: workers get the warm start and train_since
        out=run_dir,
        run_id=None,
        nproc=1,
        model_config=job.model_config.resolve() if job.model_config is not None else None,
        effective_config=None,
        register=False,
        summary_file=run_dir / LAUNCH_SUMMARY,
    )


def _job_adapter() -> TypeAdapter[TrainJob]:
    return TypeAdapter(TrainJob)


def job_to_json(job: TrainJob) -> str:
    """The job as JSON: what a launched worker reads back with :func:`job_from_json`."""
    return json.dumps(_job_adapter().dump_python(job, mode="json"), indent=2, sort_keys=True)


def job_from_json(text: str) -> TrainJob:
    """The job :func:`job_to_json` wrote; RankerError (one line) for anything else."""
    from dataclasses import MISSING, fields

    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise RankerError(f"not a train job: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise RankerError("not a train job: not a JSON object")
    known = {f.name for f in fields(TrainJob)}
    required = {f.name for f in fields(TrainJob) if f.default is MISSING and f.default_factory is MISSING}
    if set(raw) - known or required - set(raw):
        unknown, missing = sorted(set(raw) - known), sorted(required - set(raw))
        raise RankerError(
            f"not a train job: {'unknown keys ' + str(unknown) if unknown else 'missing ' + str(missing)}"
        )
    try:
        return _job_adapter().validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RankerError(f"not a train job: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _launch(job: TrainJob, run_dir: Path, warm: Path | None) -> TrainSummary:
    """Run the job under torchrun with ``nproc`` workers; return rank 0's summary."""
    from ranking.core.atomic import atomic_write_text, read_json
    from ranking.trainer.distributed.setup import torchrun_command

    worker = worker_job(job, run_dir, warm)
    summary_file = run_dir / LAUNCH_SUMMARY
    run_dir.mkdir(parents=True, exist_ok=True)
    summary_file.unlink(missing_ok=True)
    atomic_write_text(run_dir / WORKER_JOB, job_to_json(worker) + "\n")
    cmd = torchrun_command(job.nproc, [str(run_dir / WORKER_JOB)], module="ranking.trainer.worker")
    log.info("launching %d workers: %s", job.nproc, " ".join(cmd))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        proc = subprocess.run(cmd, env=env, check=False)
    finally:
        (run_dir / WORKER_JOB).unlink(missing_ok=True)
    if proc.returncode != 0:
        raise TrainingFailed(f"torchrun workers failed (exit {proc.returncode}); see their errors above")
    if not summary_file.is_file():
        raise TrainingFailed(f"torchrun workers finished without a summary ({summary_file})")
    summary = TrainSummary.model_validate(read_json(summary_file))
    summary_file.unlink(missing_ok=True)
    return summary


def machine_processes() -> tuple[int, str]:
    """How many training processes this machine runs side by side, and why: one per visible GPU
    (each rank takes its own device), else one per CPU core this process may use (gloo)."""
    import torch

    if torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        return gpus, f"{gpus} visible GPU(s), one per process"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores, f"{cores} usable CPU core(s), one per process"


def check_nproc(nproc: int, available: int, why: str) -> None:
    """Refuse ``--nproc`` beyond :data:`MAX_NPROC` or beyond what the machine runs (``why``)."""
    if nproc > MAX_NPROC:
        raise RankerError(f"--nproc {nproc} exceeds {MAX_NPROC}")
    if nproc > available:
        raise RankerError(
            f"--nproc {nproc}: this machine runs at most {available} training processes ({why}); lower"
            " --nproc, or launch across nodes with torchrun"
        )


def _env_threads() -> int | None:
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


def _feature_version() -> str:
    """The version (hash) of this checkout's feature definitions: a window built with others is
    refused before training."""
    from features.feast_repo import feature_version

    return feature_version()
