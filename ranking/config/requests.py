"""Each step's typed request, built in one place from the effective pipeline config.

The ``ranker`` command lines (one step each, as the DAG calls them) and the steps that run others
in process (``ranker run``, ``ranker pretrain``, the gate suite) build their requests here, so a
value set in the config file, the environment, a flag or ``--params`` reaches the step the same
way whoever starts it. What a caller decides for itself (the eval day, the run id, where the run
folder goes, how many processes) is an argument; everything else is the config's.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.config.model import PipelineConfig, RecipeSection
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from features.validation.step import ValidationRequest
    from features.window import WindowRequest
    from ranking.config.loader import EffectiveConfig
    from ranking.gate.run import GateRequest
    from ranking.monitoring.publish import PublishRequest
    from ranking.registry.retention import RetentionPolicy
    from ranking.trainer.job import TrainJob

# The base model is not a daily model: its recipe is the built-in one from scratch, with the
# [pretrain] section's schedule, epochs and seed, except these keys, which it takes from the daily
# recipe: a daily warm start loads the base, so both share the architecture (the model file, the
# history features) and the optimizers; the pipeline and the batch size are how batches are fed
BASE_INHERITS = (
    "model_file",
    "history_features",
    "table_optimizer",
    "dense_optimizer",
    "pipeline",
    "batch_size",
)
# the base's own, from [pretrain]
BASE_OWN = ("schedule", "epochs", "seed")


def window_request(
    config: PipelineConfig, ws: Workspace, end: dt.date, days: int | None = None
) -> WindowRequest:
    """The window ending ``end`` (its eval day): ``days`` long (default ``window.days``), checked
    by the ``[window]`` section, built with the ``[features]`` store."""
    from features.window import WindowRequest

    return WindowRequest(
        workspace=ws,
        end=end,
        days=days if days is not None else config.window.days,
        checks=config.window.checks(),
        settings=config.features.store_settings(),
    )


def validation_request(
    config: PipelineConfig, ws: Workspace, end: dt.date, days: int | None = None
) -> ValidationRequest:
    """The data validation of the window ending ``end``: the ``[validation]`` section."""
    from features.validation.step import ValidationRequest

    return ValidationRequest(
        workspace=ws,
        end=end,
        days=days if days is not None else config.window.days,
        config=config.validation.validation_config(),
    )


def train_job(
    effective: EffectiveConfig,
    ws: Workspace,
    end: dt.date,
    *,
    days: int | None = None,
    run_id: str | None = None,
    out: Path | None = None,
    resume: bool = False,
    nproc: int = 1,
    threads: int | None = None,
    eval_each_epoch: bool = True,
    register: bool = True,
    progress: bool = True,
    shuffle_buffer: int | None = None,
) -> TrainJob:
    """The ``train`` step on the window ending ``end``: the ``[recipe]`` section, every key of it
    (``tests/config/test_config_drift.py::test_every_recipe_key_is_a_train_flag_or_config_only``
    checks none is left out), and the window's length."""
    from ranking.trainer.job import TrainJob
    from ranking.trainer.models.config import OptimizerConfig, TrainConfig

    config = effective.config
    recipe = config.recipe
    return TrainJob(
        workspace=ws,
        end=end,
        days=days if days is not None else config.window.days,
        schedule=recipe.schedule,
        epochs=recipe.epochs,
        pipeline=recipe.pipeline,
        warm_start=recipe.warm_start,
        warm_start_scope=recipe.warm_start_scope,
        warm_start_optimizer=recipe.warm_start_optimizer,
        incremental=recipe.incremental,
        full_retrain_every_days=recipe.full_retrain_every_days,
        full_retrain_warm_start=recipe.full_retrain_warm_start,
        remedy=recipe.remedy,
        seed=recipe.seed,
        batch_size=recipe.batch_size,
        model_config=Path(recipe.model_file) if recipe.model_file else None,
        history_features=recipe.history_features,
        table_optimizer=OptimizerConfig(**recipe.table_optimizer.model_dump())
        if recipe.table_optimizer
        else None,
        dense_optimizer=OptimizerConfig(**recipe.dense_optimizer.model_dump())
        if recipe.dense_optimizer
        else None,
        out=out,
        run_id=run_id,
        resume=resume,
        nproc=nproc,
        threads=threads,
        eval_each_epoch=eval_each_epoch,
        register=register,
        progress=progress,
        effective_config=effective.to_dict(),
        shuffle_buffer=shuffle_buffer if shuffle_buffer is not None else TrainConfig.shuffle_buffer_rows,
    )


def base_config(config: PipelineConfig, *, schedule: str, epochs: int, seed: int) -> PipelineConfig:
    """The pipeline config the base model trains with: every ``[recipe]`` key set for it, from
    scratch (the built-in recipe with the base's schedule, epochs and seed), except
    :data:`BASE_INHERITS`, so a daily recipe's warm start, lineage or remedy never reach the base."""
    daily = config.recipe
    recipe = RecipeSection(
        warm_start="none",
        schedule=schedule,
        epochs=epochs,
        seed=seed,
        **{key: getattr(daily, key) for key in BASE_INHERITS},
    )
    return config.model_copy(update={"recipe": recipe})


def gate_request(
    config: PipelineConfig,
    ws: Workspace,
    candidate: str,
    end: dt.date | None = None,
    *,
    registry: str | None = None,
    run_id: str | None = None,
) -> GateRequest:
    """Judge ``candidate`` on ``end`` with the ``[gate]`` section's checks, beside the
    ``[heuristic]`` section's non-learned ranker, on the ``[slices]`` section's slices."""
    from ranking.gate.run import GateRequest

    return GateRequest(
        ws=ws,
        candidate=candidate,
        registry=registry,
        end=end,
        config=config.gate.gate_config(),
        run_id=run_id,
        heuristic=config.heuristic.heuristic_config(),
        slices=config.slices.slice_config(),
    )


def publish_request(
    config: PipelineConfig,
    ws: Workspace,
    run_id: str,
    *,
    status: str | None = None,
    failed_step: str | None = None,
    push_attempts: int = 3,
) -> PublishRequest:
    """Publish run ``run_id``'s metrics where the ``[metrics]`` section says."""
    from ranking.monitoring.publish import PublishRequest

    metrics = config.metrics
    return PublishRequest(
        workspace=ws,
        run_id=run_id,
        status=status,
        failed_step=failed_step,
        pushgateway=metrics.pushgateway,
        job=metrics.job,
        push_attempts=push_attempts,
        textfile=Path(metrics.textfile).expanduser().resolve() if metrics.textfile else None,
    )


def retention_policy(config: PipelineConfig) -> RetentionPolicy:
    """``[retention]`` as the janitor's policy: window days are kept as far back as the daily
    window, its base's range before it and the weekly review read, plus ``window_extra_days``."""
    from ranking.registry.retention import RetentionPolicy

    r = config.retention
    read = (
        config.window.days
        + (config.pretrain.days or config.window.days)
        + config.pretrain.gap_days
        + config.review.days
    )
    named = (config.recipe.warm_start, config.recipe.full_retrain_warm_start)
    return RetentionPolicy(
        checkpoint_days=r.checkpoint_days,
        run_days=r.run_days,
        backtest_days=r.backtest_days,
        window_days=None if r.window_extra_days is None else read + r.window_extra_days,
        keep_runs=r.keep_runs,
        keep_rollbacks=r.keep_rollbacks,
        keep_paths=tuple(w for w in named if w not in ("champion", "base", "none")),
    )
