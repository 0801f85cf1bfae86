"""``ranker train``: the command line of a training job (ranking.trainer.job runs it).

One entry point for every scale: in this process, under torchrun with ``--nproc N``, or as each
rank of an external ``torchrun -m ranking.cli train ...``. Heavy imports happen inside the handler.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.cli.common import CommandResult, add_common, parse_date, positive_int, workspace
from ranking.config.model import DEFAULT_WARM_START
from ranking.trainer.config import PIPELINES, TrainConfig

if TYPE_CHECKING:
    from ranking.trainer.job import TrainJob


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``train`` to ``ranker``."""
    p = sub.add_parser("train", help="train the ranker on a window (delayed-embedding multi-epoch)")
    add_common(p)
    p.add_argument("--end", type=parse_date, required=True, help="window end (exclusive); the eval day")
    p.add_argument("--days", type=positive_int, default=20, help="window length in days")
    p.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help="epochs (an explicit list such as F,J,J: its length)",
    )
    p.add_argument(
        "--schedule",
        default="delayed",
        help="delayed (F,J,J…) | joint | frozen | joint_then_frozen | an explicit list such as F,J,J",
    )
    p.add_argument("--pipeline", choices=PIPELINES, default=TrainConfig.pipeline)
    p.add_argument(
        "--warm-start",
        default=DEFAULT_WARM_START,
        help="PATH to a checkpoint | champion (the registry's, if any) | base (the registry's base"
        " model, ranker pretrain) | none",
    )
    p.add_argument(
        "--warm-start-optimizer",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="carry the warm start's table-optimizer state (row-wise Adagrad sums) instead of"
        " starting it empty",
    )
    p.add_argument(
        "--incremental",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="continue the champion on only the days after its window (needs --warm-start champion)",
    )
    p.add_argument(
        "--full-retrain-every-days",
        type=positive_int,
        default=None,
        metavar="K",
        help="with --incremental: a full retrain every K days since the last one (unset: never)",
    )
    p.add_argument(
        "--full-retrain-warm-start",
        default="base",
        help="what a full retrain of an incremental recipe starts from",
    )
    p.add_argument("--train-since", type=parse_date, default=None, help=argparse.SUPPRESS)  # launcher's
    p.add_argument(
        "--warm-start-scope",
        choices=("all", "dense"),
        default="all",
        help="what the warm start loads: all weights or the dense layers only (fresh tables)",
    )
    p.add_argument(
        "--remedy",
        choices=("none", "meda"),
        default="none",
        help="epoch-start remedy: meda = tables and their optimizer state back to the seed's init "
        "each epoch, dense layers kept",
    )
    p.add_argument("--out", default=None, help="run folder (default <home>/runs/<run id>)")
    p.add_argument(
        "--resume", action="store_true", help="continue the run in --out after its last complete epoch"
    )
    p.add_argument("--nproc", type=positive_int, default=1, help="processes (torchrun on this machine)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=positive_int, default=1024, help="global batch size")
    p.add_argument("--shuffle-buffer", type=int, default=100_000, help="rows in the shuffle buffer per rank")
    p.add_argument("--model-config", type=Path, default=None, help="ModelConfig as JSON or YAML")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads per process (sets OMP_NUM_THREADS before torch loads; default $OMP_NUM_THREADS, else 1)",
    )
    p.add_argument("--no-eval-each-epoch", action="store_true", help="evaluate only the final model")
    p.add_argument("--no-register", action="store_true", help="do not register the run in the model registry")
    p.add_argument("--no-progress", action="store_true", help="no progress bar / progress log lines")
    p.add_argument("--summary-file", type=Path, default=None, help=argparse.SUPPRESS)  # set by --nproc
    p.set_defaults(handler=_train, step="train")


def train_job(args: argparse.Namespace) -> TrainJob:
    """The typed request of a ``ranker train`` command line."""
    from ranking.cli.config import effective_config
    from ranking.trainer.config import OptimizerConfig
    from ranking.trainer.job import TrainJob

    effective = effective_config(args)
    recipe = effective.config.recipe
    return TrainJob(
        workspace=workspace(args),
        end=args.end,
        days=args.days,
        schedule=args.schedule,
        epochs=args.epochs,
        pipeline=args.pipeline,
        warm_start=args.warm_start,
        warm_start_scope=args.warm_start_scope,
        warm_start_optimizer=args.warm_start_optimizer,
        incremental=args.incremental,
        full_retrain_every_days=args.full_retrain_every_days,
        full_retrain_warm_start=args.full_retrain_warm_start,
        train_since=args.train_since,
        remedy=args.remedy,
        out=Path(args.out) if args.out else None,
        run_id=args.run_id,
        resume=args.resume,
        nproc=args.nproc,
        seed=args.seed,
        batch_size=args.batch_size,
        shuffle_buffer=args.shuffle_buffer,
        model_config=args.model_config,
        threads=args.threads,
        eval_each_epoch=not args.no_eval_each_epoch,
        register=not args.no_register,
        progress=not args.no_progress,
        summary_file=args.summary_file,
        table_optimizer=OptimizerConfig(**recipe.table_optimizer.model_dump())
        if recipe.table_optimizer
        else None,
        dense_optimizer=OptimizerConfig(**recipe.dense_optimizer.model_dump())
        if recipe.dense_optimizer
        else None,
        config_file=Path(args.config) if args.config is not None else None,
        effective_config=effective.to_dict(),
    )


def _train(args: argparse.Namespace) -> CommandResult:
    from ranking.trainer.job import run_train_job

    summary = run_train_job(train_job(args))
    if summary is None:  # a non-zero rank, or a worker whose launcher reports
        return CommandResult(quiet=True)
    return CommandResult(summary=summary, text=_train_text(summary))


def _train_text(s: dict[str, Any]) -> str:
    lines = [f"run {s['run_dir']}  schedule {s['schedule']}  pipeline {s['pipeline']}  seed {s['seed']}"]
    for e in s["epochs"]:
        ev = e.get("eval") or {}
        lines.append(
            f"  epoch {e['epoch']} [{e['phase']:6}] loss {e['loss']:.4f}  {e['samples_per_second']:,.0f} samples/s"
            f"  lookup {e['lookup_ratio']:.1%} (exposed {e['exposed_lookup_ratio']:.1%})"
            + (f"  HIT@3 {ev['save_hit_at_3']:.4f} AUC {ev['auc']:.4f}" if ev else "")
        )
    ev = s["eval"]
    lines.append(f"eval: save HIT@3 {ev['save_hit_at_3']:.4f}  AUC {ev['auc']:.4f}  NE {ev['ne']:.4f}")
    if s.get("version"):
        lines.append(f"registered as {s['version']}")
    return "\n".join(lines)
