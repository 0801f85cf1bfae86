"""The training job: window -> sharded model -> one phase per epoch -> checkpoints -> eval.

Every rank runs :func:`run_training`; rank 0 alone writes files and returns the summary. The same
function runs in one process (a gloo group of size 1) and under torchrun (see
ranking/trainer/distributed/setup.py). Run folder layout: docs/architecture.md "Training run folder".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict

from features.window import WindowManifest
from ranking.core.atomic import atomic_write_json, atomic_write_text, read_json
from ranking.core.code_version import code_version
from ranking.core.errors import RankerError, TrainingFailed
from ranking.core.summaries import (
    DataValidation,
    EpochSummary,
    EvalSummary,
    Lineage,
    RemedySummary,
    Summary,
    TrainSummary,
    TrainWindow,
    WarmStart,
)
from ranking.trainer.checkpointing.checkpoint import (
    CheckpointError,
    checkpoint_meta,
    epoch_checkpoint_path,
    latest_complete_checkpoint,
    load_checkpoint,
)
from ranking.trainer.checkpointing.records import CheckpointMeta, StateDict
from ranking.trainer.datasets.input import (
    InputOptions,
    default_cache_root,
    input_options_from_env,
    ready_batches,
)
from ranking.trainer.datasets.window import list_units, plan_epoch, validate_window
from ranking.trainer.models.config import ModelConfig, TrainConfig, resolve_pipeline
from ranking.trainer.reports.curve_data import (
    CurveRecorder,
    TrainingCurve,
    every_steps_for,
    read_training_curve,
    write_training_curve,
)
from ranking.trainer.schedule import FROZEN, schedule_letters

if TYPE_CHECKING:
    from ranking.evaluation.metrics import OfflineMetrics

log = logging.getLogger(__name__)

FINAL_CHECKPOINT = "model.pt"
TABLE_PREFIX = "sparse_arch."  # state-dict keys of the embedding tables (unsharded RankerModel)
LOSS_CHECK_STEPS = 16  # steps between loss checks (NaN/inf) and progress updates


@dataclass(frozen=True)
class TrainRequest:
    manifest: WindowManifest
    model_config: ModelConfig
    train_config: TrainConfig
    run_dir: Path
    warm_start: Path | None = None
    warm_start_source: str = "none"  # "none" | "champion" | "path"
    warm_start_scope: str = "all"  # "all" | "dense": dense only = tables start from the seed's init
    # carry the warm start's table-optimizer state (row-wise Adagrad sums) instead of starting empty
    warm_start_optimizer: bool = False
    resume: bool = False
    expected_feature_version: str | None = None
    progress: bool = True
    threads: int | None = None  # torch intra-op threads (None: torch's default)
    # how batches are made ready (workers, prefetch, encoded cache); None: InputOptions' defaults
    # with the RANKER_INPUT_* environment, pinned on CUDA (ranking.trainer.datasets.input)
    input_options: InputOptions | None = None


def trained_window(manifest: WindowManifest) -> TrainWindow:
    """The window as the run trained on it (an incremental run: the days it kept)."""
    return TrainWindow(
        window_id=manifest.window_id,
        manifest=str(manifest.path),
        end=manifest.end,
        days=manifest.days,
        rows_train=manifest.train_rows,
        rows_eval=manifest.eval.rows,
        feature_version=manifest.feature_version,
        train_dates=[p.date for p in manifest.train],
        eval_date=manifest.eval.date,
    )


def same_architecture(a: ModelConfig, b: ModelConfig) -> bool:
    """The parts of the configs that shape the weights are equal (optimizers excluded)."""
    return replace(a, table_optimizer=b.table_optimizer, dense_optimizer=b.dense_optimizer) == b


def _check_run_dir(req: TrainRequest) -> None:
    existing = (req.run_dir / FINAL_CHECKPOINT).exists() or (req.run_dir / "checkpoints").is_dir()
    if existing and not req.resume:
        raise RankerError(f"run folder {req.run_dir} already holds a run: pass --resume or another --out")
    if (
        req.resume
        and (req.run_dir / FINAL_CHECKPOINT).exists()
        and latest_complete_checkpoint(req.run_dir) is None
    ):
        # a finished run without epoch checkpoints (a registry version folder, a copied run):
        # --resume would start at epoch 1 and overwrite it
        raise RankerError(
            f"--resume: {req.run_dir} holds a finished model ({FINAL_CHECKPOINT}) but no complete epoch"
            " checkpoint to continue from; refusing to train over it (use another --out)"
        )


def _load_warm_start(req: TrainRequest) -> tuple[StateDict | None, StateDict | None]:
    """(model state to start from, table-optimizer state to carry); (None, None) without one."""
    if req.warm_start is None:
        return None, None
    payload = load_checkpoint(req.warm_start)
    from ranking.trainer.evaluation.scoring import model_config_of

    theirs = model_config_of(req.warm_start, payload)
    if not same_architecture(theirs, req.model_config):
        raise CheckpointError(
            f"warm-start checkpoint {req.warm_start} has another architecture (tables/layers) than "
            "this run's model config: pass --warm-start none or the same --model-config"
        )
    if payload.get("feature_version") not in (None, req.manifest.feature_version):
        log.warning(
            "warm start %s was trained on feature definitions %s, this window uses %s",
            req.warm_start,
            payload.get("feature_version"),
            req.manifest.feature_version,
        )
    state: StateDict = payload["model"]
    if req.warm_start_scope == "dense":
        if req.warm_start_optimizer:
            raise RankerError(
                "warm_start_optimizer needs warm_start_scope all (dense-only starts fresh tables)"
            )
        # the tables start from the seed's init; everything else continues from the checkpoint
        return {k: v for k, v in state.items() if not k.startswith(TABLE_PREFIX)}, None
    if not req.warm_start_optimizer:
        return state, None
    table_opt = payload.get("table_optimizer")
    if not isinstance(table_opt, dict) or not table_opt:
        raise CheckpointError(
            f"warm start {req.warm_start} holds no table-optimizer state (saved before it was kept):"
            " set recipe.warm_start_optimizer = false"
        )
    return state, table_opt


def _table_init(req: TrainRequest) -> dict[str, int]:
    """Per table, the seed whose initial values its never-updated rows hold (the compact export's
    reference, ranking.trainer.checkpointing.compact): the warm start's own ``table_init`` when its tables are
    carried, which follows a warm-start chain to the tables' origin; this run's seed from scratch,
    with a dense-only warm start and with a remedy that re-initialises the tables each epoch."""
    from ranking.trainer.checkpointing.compact import table_init_seeds

    own = {t.name: req.train_config.seed for t in req.model_config.tables}
    if req.warm_start is None or req.warm_start_scope == "dense" or req.train_config.remedy != "none":
        return own
    try:
        origin = table_init_seeds(checkpoint_meta(req.warm_start))
    except CheckpointError as exc:  # gone since it was loaded: the export only grows
        log.warning("warm start %s: no table init recorded (%s)", req.warm_start, exc)
        origin = {}
    return {name: origin.get(name, seed) for name, seed in own.items()}


def _latest_on_rank0(run_dir: Path) -> tuple[int, Path] | None:
    """Rank 0 verifies the checkpoints (reading every file once), the others take its answer."""
    import torch.distributed as dist

    multi = dist.is_initialized() and dist.get_world_size() > 1
    found = latest_complete_checkpoint(run_dir) if not multi or dist.get_rank() == 0 else None
    if multi:
        box: list[Any] = [found]
        dist.broadcast_object_list(box, src=0)
        found = box[0]
    return found


def _load_resume(req: TrainRequest) -> tuple[Path, CheckpointMeta] | None:
    """The newest complete epoch checkpoint of the run and its meta (plain values)."""
    from ranking.trainer.checkpointing.state import read_meta

    if not req.resume:
        return None
    found = _latest_on_rank0(req.run_dir)
    if found is None:
        log.info("--resume: no complete checkpoint in %s, starting from epoch 1", req.run_dir)
        return None
    epoch, path = found
    meta = read_meta(path)
    expected = (
        ("train_config", meta.get("train_config"), req.train_config.to_dict()),
        ("model_config", meta.get("model_config"), req.model_config.to_dict()),
        ("window_id", meta.get("window_id"), req.manifest.window_id),
    )
    for key, recorded, want in expected:
        # compare as JSON: tuples and lists are the same setting
        if json.dumps(recorded, sort_keys=True) != json.dumps(want, sort_keys=True):
            raise CheckpointError(f"--resume: {path} was written with another {key}; use a new --out")
    log.info(
        "--resume: continuing after epoch %d (%s, written by %s ranks)", epoch, path, meta.get("world_size")
    )
    return path, meta


@dataclass
class ShardedStack:
    dmp: Any  # DistributedModelParallel(TrainTask)
    task: Any  # the TrainTask inside it
    optimizer: Any  # dense optimizer (never holds table parameters)
    sharding: dict[str, str]


def build_sharded(
    cfg: ModelConfig,
    seed: int,
    ctx: Any,
    init_state: StateDict | None = None,
    prior_rate: float | None = None,
) -> ShardedStack:
    """Model with fused table optimizer, sharded by DMP, loaded with ``init_state`` (unsharded) or
    the seed's initial weights: the same starting point whatever the world size.

    The tables are built on the meta device and only materialised as this rank's shards by DMP,
    then filled from the seed block by block (ranking.trainer.models.init); the dense layers are small and
    built on the CPU under the seed, identically in every process.

    A partial ``init_state`` (e.g. a dense-only warm start) overrides only the keys it holds; the
    rest keep the seed's initial values. From scratch, the output bias starts at the log-odds of ``prior_rate`` (the window's save rate):
    a fresh model then predicts the base rate instead of ~0.5, so a short first run is calibrated
    (the gate's sanity check) instead of spending its first steps pulling the bias down."""
    import torch

    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.models.init import init_table_shards
    from ranking.trainer.models.model import (
        RankerModel,
        TrainTask,
        apply_table_optimizer,
        build_dense_optimizer,
        dense_parameters,
    )

    torch.manual_seed(seed)
    model = RankerModel(cfg, device=torch.device("cpu"), table_device=torch.device("meta"))
    if init_state is None and prior_rate is not None and 0.0 < prior_rate < 1.0:
        with torch.no_grad():
            model.head.bias.fill_(math.log(prior_rate / (1.0 - prior_rate)))
    apply_table_optimizer(model, cfg.table_optimizer)
    dmp = distributed.shard(TrainTask(model, ctx.world_size), [t.name for t in cfg.tables], ctx)
    init_table_shards(dmp, cfg, seed)
    if init_state is not None:
        live = {k[len("model.") :]: v for k, v in dmp.state_dict().items()}
        unknown = set(init_state) - set(live)
        if unknown:
            raise CheckpointError(f"warm-start state has keys this model lacks: {sorted(unknown)[:5]}")
        distributed.load_state_dict_into({k: live[k] for k in init_state}, init_state)
    task = distributed.unwrap(dmp)
    optimizer = build_dense_optimizer(dense_parameters(task), cfg.dense_optimizer)
    return ShardedStack(dmp, task, optimizer, distributed.sharding_summary(dmp))


def run_training(req: TrainRequest) -> TrainSummary | None:
    """Train on every rank; rank 0 returns the summary (other ranks None)."""
    from ranking.trainer.distributed import setup as distributed

    distributed.quiet_library_noise()
    if req.threads is not None:
        import torch

        torch.set_num_threads(req.threads)
    ctx = distributed.init_distributed()
    try:
        return _Trainer(req, ctx).run()
    finally:
        distributed.shutdown(ctx)


class _LossAccount:
    """An epoch's losses, checked and summed LOSS_CHECK_STEPS steps at a time: one host sync (and,
    with several ranks, one all-reduce) per that many steps instead of per step. The per-step
    curve is fed from the same host copies (global losses under several ranks), no sync of its own."""

    def __init__(
        self, plan: Any, epoch: int, progress: Any, multi: bool, curve: CurveRecorder | None = None
    ) -> None:
        self.plan, self.epoch, self.progress, self.multi = plan, epoch, progress, multi
        self.curve = curve
        self.pending: list[Any] = []
        self.steps = 0
        self.total = 0.0

    def on_step(self, local_loss: Any, rows: int) -> None:
        self.pending.append(local_loss)
        if len(self.pending) >= LOSS_CHECK_STEPS:
            self.flush()

    def flush(self) -> None:
        import torch
        import torch.distributed as dist

        if not self.pending:
            return
        losses = torch.stack([x.detach().float().reshape(()) for x in self.pending]).cpu()
        self.pending.clear()
        if self.multi:
            dist.all_reduce(losses)  # each rank's share -> the global-batch mean per step
        for value in losses.tolist():
            if not math.isfinite(value):
                raise TrainingFailed(
                    f"non-finite loss ({value}) at epoch {self.epoch} step {self.steps + 1}: training "
                    "stopped, no final checkpoint written"
                )
            global_rows = self.plan.global_rows(self.steps)
            self.total += value * global_rows
            self.progress.update(global_rows, value * global_rows)
            if self.curve is not None:
                self.curve.add(value, global_rows)
            self.steps += 1


class _Trainer:
    def __init__(self, req: TrainRequest, ctx: Any) -> None:
        self.req = req
        self.ctx = ctx
        self.cfg = req.model_config
        self.tc = req.train_config
        self.curve: CurveRecorder | None = None  # rank 0's per-step curve, from its first epoch on
        self.resumed_epochs: list[EpochSummary] = []

    # -------------------------------------------------------------- setup
    def _build(self, init_state: StateDict | None) -> None:
        stack = build_sharded(
            self.cfg, self.tc.seed, self.ctx, init_state, prior_rate=self.req.manifest.train_label_rate
        )
        self.dmp, self.task, self.optimizer = stack.dmp, stack.task, stack.optimizer
        self.sharding = stack.sharding

    def _restore(self, path: Path) -> CheckpointMeta:
        from ranking.trainer.checkpointing.state import restore_epoch

        meta = restore_epoch(path, self.dmp, self.optimizer)
        self.resumed_epochs = [EpochSummary.model_validate(e) for e in meta["epochs"]]
        return meta

    def _load_table_optimizer(self, saved: StateDict) -> None:
        from ranking.trainer.distributed import setup as distributed

        live = distributed.table_optimizer_state(self.dmp)  # this rank's tables only
        if not set(live) <= set(saved):
            raise CheckpointError("checkpoint table-optimizer state does not fit this model")
        for key, value in live.items():
            distributed.copy_full_into(value, saved[key])

    def _remedy_at_epoch_start(self) -> RemedySummary | None:
        from ranking.trainer.remedies import apply_epoch_start

        return apply_epoch_start(self.tc.remedy, self.dmp, self.cfg, self.tc.seed)

    # -------------------------------------------------------------- state out
    def _meta(self, epoch: int, epochs: list[EpochSummary]) -> CheckpointMeta:
        return {
            "model_config": self.cfg.to_dict(),
            "train_config": self.tc.to_dict(),
            "epoch": epoch,
            "epochs": [e.body() for e in epochs],
            "window_id": self.req.manifest.window_id,
            "feature_version": self.req.manifest.feature_version,
            "table_init": _table_init(self.req),
        }

    def _score(self, eval_paths: list[Path]) -> Any:
        """Scores of the live sharded model on the eval day: every rank runs the same batches
        through its shards (the lookups are collective), no rank needs the whole model."""
        from ranking.trainer.evaluation.scoring import score_model

        return score_model(self.task.model, eval_paths, self.tc.eval_batch_size)

    # -------------------------------------------------------------- the per-step curve
    def _curve_for(self, steps_per_epoch: int) -> CurveRecorder:
        every = every_steps_for(steps_per_epoch)
        done = self.resumed_epochs
        if not done:
            return CurveRecorder(every)
        return CurveRecorder.resumed(
            self.req.run_dir,
            after_epoch=done[-1].epoch,
            steps=sum(e.steps for e in done),
            samples=sum(e.samples for e in done),
            every_steps=every,
        )

    def _write_curve(self) -> None:
        """Rank 0's curve so far to the run folder (a resume drops the points of an epoch written
        past its checkpoint)."""
        if self.curve is not None:
            write_training_curve(self.req.run_dir, self.curve.curve())

    def _final_curve(self) -> TrainingCurve | None:
        """The curve this process recorded, or (resumed after the last epoch) the file's."""
        if self.curve is not None:
            return self.curve.curve()
        try:
            return read_training_curve(self.req.run_dir)
        except RankerError as exc:
            log.warning("%s: curve.png shows the per-epoch losses", exc)
            return None

    # -------------------------------------------------------------- one epoch
    def _batches(self, plan: Any, epoch: int) -> Any:
        options = self.req.input_options or input_options_from_env(self.ctx.device.type)
        return ready_batches(
            plan,
            self.ctx.rank,
            self.cfg,
            self.tc.shuffle_buffer_rows,
            self.tc.seed,
            epoch,
            options,
            default_cache_root(self.req.manifest.path),
        )

    def _drive(self, batches: Any, pipeline: Any, frozen: bool, on_step: Any) -> None:
        """One epoch's steps through the run's pipeline on its device."""
        from ranking.trainer.distributed.pipelines import run_torchrec_epoch, torchrec_pipeline

        device = self.ctx.device
        with contextlib.closing(batches):  # stops the input thread and workers on any exit
            if device.type == "cuda" and self.pipeline_name == "semisync":
                run_torchrec_epoch(
                    torchrec_pipeline(self.dmp, self.optimizer, device, self.clock, frozen),
                    batches,  # torchrec copies each (pinned) batch to the device on its memcpy stream
                    on_step,
                )
            elif device.type == "cuda":  # sync: the plain loop, CUDA-event timers; pinned -> async copy
                pipeline.run_epoch((b.to(device, non_blocking=True) for b in batches), frozen, on_step)
            else:
                pipeline.run_epoch(batches, frozen, on_step)

    def _across_ranks(self, seconds: float) -> tuple[float, float, float]:
        """(lookup ratio, exposed lookup ratio) averaged over ranks, and the slowest rank's seconds."""
        import torch
        import torch.distributed as dist

        share = self.clock.share(seconds)
        ratios = torch.tensor([share.lookup_ratio, share.exposed_lookup_ratio], dtype=torch.float64)
        slowest = torch.tensor([seconds], dtype=torch.float64)
        if self.ctx.world_size > 1:
            dist.all_reduce(ratios)
            ratios /= self.ctx.world_size
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return float(ratios[0]), float(ratios[1]), float(slowest[0])

    def _epoch(self, epoch: int, units: list[Any], pipeline: Any) -> EpochSummary:
        import torch

        from ranking.trainer.reports.progress import EpochProgress

        phase = self.tc.schedule[epoch - 1]
        frozen = phase == FROZEN
        self.task.model.embeddings_frozen = frozen
        plan = plan_epoch(units, self.ctx.world_size, self.tc.batch_size, self.tc.seed, epoch)
        progress = EpochProgress(
            epoch,
            self.tc.epochs,
            phase,
            plan.steps,
            plan.rows,
            enabled=self.req.progress and self.ctx.is_main,
        )
        if self.ctx.is_main:
            if self.curve is None:
                self.curve = self._curve_for(plan.steps)
            self.curve.start_epoch(epoch, phase)
        losses = _LossAccount(plan, epoch, progress, multi=self.ctx.world_size > 1, curve=self.curve)
        self.clock.reset()
        cuda = self.ctx.device.type == "cuda"
        if cuda:
            torch.cuda.reset_peak_memory_stats(self.ctx.device)
        start = time.perf_counter()
        self._drive(self._batches(plan, epoch), pipeline, frozen, losses.on_step)
        losses.flush()
        if self.curve is not None:
            self.curve.end_epoch()
        if losses.steps != plan.steps:
            raise TrainingFailed(f"epoch {epoch} ran {losses.steps} steps, the plan has {plan.steps}")
        lookup, exposed, seconds = self._across_ranks(time.perf_counter() - start)
        stats = EpochSummary(
            epoch=epoch,
            phase=phase,
            loss=losses.total / plan.rows,
            samples=plan.rows,
            steps=plan.steps,
            samples_per_second=plan.rows / seconds if seconds > 0 else float("nan"),
            # with the section clock off nothing was measured: no figure rather than a 0
            lookup_ratio=lookup if self.clock.enabled else None,
            exposed_lookup_ratio=exposed if self.clock.enabled else None,
            duration_seconds=seconds,
        )
        if cuda:  # this rank's peak (rank 0's in the summary)
            peak = int(torch.cuda.max_memory_allocated(self.ctx.device))
            stats = stats.model_copy(update={"peak_gpu_memory_bytes": peak})
        progress.close(**{k: v for k, v in stats.body().items() if k not in ("epoch", "phase")})
        return stats

    # -------------------------------------------------------------- the run
    def run(self) -> TrainSummary | None:
        from ranking.evaluation.scores import metrics_of, write_scores
        from ranking.trainer.checkpointing.state import save_epoch
        from ranking.trainer.distributed import setup as distributed
        from ranking.trainer.distributed.pipelines import CpuPipeline
        from ranking.trainer.distributed.timing import SectionClock
        from ranking.trainer.reports.plots import plot_curve

        req, ctx = self.req, self.ctx
        t_start = time.perf_counter()
        started_at = dt.datetime.now(dt.UTC).isoformat()
        validate_window(req.manifest, self.cfg, req.expected_feature_version)
        _check_run_dir(req)
        resume = _load_resume(req)
        warm_state, warm_table_opt = _load_warm_start(req) if resume is None else (None, None)
        self._build(warm_state)
        if warm_table_opt is not None:
            self._load_table_optimizer(warm_table_opt)
        epochs: list[EpochSummary] = []
        start_epoch = 1
        if resume is not None:
            meta = self._restore(resume[0])
            epochs = list(self.resumed_epochs)
            start_epoch = int(meta["epoch"]) + 1
        if ctx.is_main:
            req.run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(req.run_dir / "model_config.json", self.cfg.to_json() + "\n")
        distributed.barrier()
        self.clock = SectionClock(enabled=self.tc.timing, cuda=ctx.device.type == "cuda")
        self.pipeline_name = resolve_pipeline(self.tc.pipeline, ctx.device.type)
        pipeline = CpuPipeline(
            self.dmp, self.optimizer, self.clock, semisync=self.pipeline_name == "semisync"
        )
        units = list_units([p.path for p in req.manifest.train])
        eval_paths = [req.manifest.eval.path]
        scores = None
        for epoch in range(start_epoch, self.tc.epochs + 1):
            remedy = self._remedy_at_epoch_start()
            stats = self._epoch(epoch, units, pipeline)
            if remedy is not None:
                stats = stats.model_copy(update={"remedy": remedy})
            if self.tc.eval_each_epoch or epoch == self.tc.epochs:
                scores = self._score(eval_paths)
                stats = stats.model_copy(update={"eval": _eval_summary(metrics_of(scores))})
            epochs.append(stats)
            self._write_curve()  # before the checkpoint: the file holds every checkpointed epoch
            save_epoch(
                epoch_checkpoint_path(req.run_dir, epoch), self.dmp, self.optimizer, self._meta(epoch, epochs)
            )
        if scores is None:  # resumed after the last epoch's checkpoint
            scores = self._score(eval_paths)
        # the export reads the checkpoint from disk: free the live model first, so that rank 0's
        # peak is the larger of the two, not their sum
        del pipeline
        self.dmp = self.task = self.optimizer = None
        gc.collect()
        if not ctx.is_main:
            return None
        final_eval = _eval_summary(metrics_of(scores))
        return self._finish(
            epochs,
            scores,
            final_eval,
            t_start,
            started_at,
            start_epoch,
            plot_curve,
            write_scores,
        )

    def _finish(
        self,
        epochs: list[EpochSummary],
        scores: Any,
        final_eval: EvalSummary,
        t_start: float,
        started_at: str,
        start_epoch: int,
        plot_curve: Any,
        write_scores: Any,
    ) -> TrainSummary:
        from ranking.trainer.checkpointing.state import export_checkpoint

        req, tc, run_dir = self.req, self.tc, self.req.run_dir
        seconds: dict[str, float] = {}
        lookup: dict[str, float] = {}
        exposed: dict[str, float] = {}
        for e in epochs:
            seconds[e.phase] = seconds.get(e.phase, 0.0) + e.duration_seconds
            lookup[e.phase] = lookup.get(e.phase, 0.0) + (e.lookup_ratio or 0.0) * e.duration_seconds
            exposed[e.phase] = (
                exposed.get(e.phase, 0.0) + (e.exposed_lookup_ratio or 0.0) * e.duration_seconds
            )
        timed = [p for p in seconds if seconds[p] and self.clock.enabled]
        train_seconds = sum(e.duration_seconds for e in epochs)
        window = trained_window(req.manifest)
        warm_start = WarmStart(
            source=req.warm_start_source,
            path=str(req.warm_start) if req.warm_start else None,
            scope=req.warm_start_scope if req.warm_start else None,
        )
        write_scores(run_dir / "eval_scores.parquet", scores)
        atomic_write_json(
            run_dir / "eval.json", {**final_eval.body(), "eval_date": req.manifest.eval.date.isoformat()}
        )
        plot_curve(run_dir / "curve.png", epochs, curve=self._final_curve())
        # typed before anything marks the run finished: a field that does not fit fails here
        summary = TrainSummary(
            run_dir=str(run_dir),
            schedule=schedule_letters(tc.schedule),
            schedule_spec=tc.schedule_spec,
            pipeline=self.pipeline_name,  # type: ignore[arg-type]  # what ran (train_config keeps what was asked: auto)
            remedy=tc.remedy,
            seed=tc.seed,
            epochs=epochs,
            eval=final_eval,
            samples_per_second=sum(e.samples for e in epochs) / train_seconds if train_seconds else None,
            wall_seconds_by_phase=seconds,  # type: ignore[arg-type]
            lookup_ratio_by_phase={p: lookup[p] / seconds[p] for p in timed},  # type: ignore[misc]
            exposed_lookup_ratio_by_phase={p: exposed[p] / seconds[p] for p in timed},  # type: ignore[misc]
            window=window,
            warm_start=warm_start,
            resumed_after_epoch=start_epoch - 1 if req.resume and start_epoch > 1 else None,
            world_size=self.ctx.world_size,
            device=self.ctx.device.type,
            sharding=self.sharding,
            code_version=code_version(),
            started_at=started_at,  # type: ignore[arg-type]
            duration_seconds=time.perf_counter() - t_start,
        )
        TrainManifest(
            schedule=summary.schedule,
            schedule_spec=summary.schedule_spec,
            pipeline=summary.pipeline,
            seed=summary.seed,
            epochs=epochs,
            warm_start=warm_start,
            window=window,
            window_id=req.manifest.window_id,
            window_manifest=str(req.manifest.path),
            feature_version=req.manifest.feature_version,
            train_config=tc,
            code_version=summary.code_version,
            world_size=self.ctx.world_size,
            created_at=dt.datetime.now(dt.UTC).isoformat(),
        ).write(run_dir)
        # last: its presence marks a finished run. One process streams the last epoch's shards
        # into the export (ranking.trainer.checkpointing.state); nothing is gathered over the process group
        export_checkpoint(
            epoch_checkpoint_path(run_dir, tc.epochs),
            run_dir / FINAL_CHECKPOINT,
            {**self._meta(tc.epochs, epochs), "eval": final_eval.body()},
        )
        return summary


def _eval_summary(metrics: OfflineMetrics) -> EvalSummary:
    return EvalSummary.model_validate(metrics.to_dict())


TRAIN_MANIFEST_FILE = "train_manifest.json"  # in the run folder


class TrainManifest(Summary):
    """A finished run's ``train_manifest.json`` (docs/architecture.md "Training run folder"): what
    it trained on and how, written by the loop; the train job adds the lineage, the window's data
    validation and the recipe's source (:meth:`with_provenance`). The registry keeps a digest of it
    with the version; the gate reads the lineage and the validation."""

    model_config = ConfigDict(extra="ignore")

    schedule: str
    schedule_spec: str
    pipeline: str
    seed: int
    epochs: list[EpochSummary]
    warm_start: WarmStart
    window: TrainWindow
    window_id: str
    window_manifest: str
    feature_version: str
    train_config: TrainConfig
    code_version: str
    world_size: int
    created_at: str
    lineage: Lineage | None = None
    data_validation: DataValidation | None = None
    recipe_source: str | None = None
    """the review whose recipe the run trained (``review:<id>:<recipe>``), or null"""

    @classmethod
    def read(cls, run_dir: Path) -> TrainManifest:
        return cls.model_validate(read_json(run_dir / TRAIN_MANIFEST_FILE))

    def write(self, run_dir: Path) -> None:
        atomic_write_json(run_dir / TRAIN_MANIFEST_FILE, self.body())

    def with_provenance(
        self, lineage: Lineage, validation: DataValidation | None, recipe_source: str | None
    ) -> TrainManifest:
        return self.model_copy(
            update={"lineage": lineage, "data_validation": validation, "recipe_source": recipe_source}
        )
