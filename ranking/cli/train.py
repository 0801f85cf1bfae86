"""``ranker train``: the command line of a training job (ranking.trainer.job runs it).

One entry point for every scale: in this process, under torchrun with ``--nproc N``, or as each
rank of an external ``torchrun -m ranking.cli train ...``. Heavy imports happen inside the handler.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.cli.common import (
    CommandResult,
    add_common,
    config_type,
    effective_config,
    int_in,
    parse_date,
    path_arg,
    path_str,
    workers_int,
    workspace,
)
from ranking.config.model import WARM_START_SCOPES
from ranking.trainer.models.config import PIPELINES, REMEDIES, TrainConfig

if TYPE_CHECKING:
    from ranking.trainer.job import TrainJob


# rows a rank holds to shuffle (0: none): past any window this pipeline reads, which a larger
# buffer would only hold whole
MAX_SHUFFLE_ROWS = 10**8


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``train`` to ``ranker``."""
    p = sub.add_parser("train", help="train the ranker on a window (delayed-embedding multi-epoch)")
    add_common(p)
    p.add_argument("--end", type=parse_date, required=True, help="window end (exclusive); the eval day")
    # bound flags (ranking.cli.config.bindings): an unset one takes the config's value, which
    # --help shows; their argparse default is never used
    p.add_argument("--days", type=config_type("window.days"), default=None, help="window length in days")
    p.add_argument(
        "--epochs",
        type=config_type("recipe.epochs"),
        default=None,
        help="epochs (an explicit list such as F,J,J: its length)",
    )
    p.add_argument(
        "--schedule",
        type=config_type("recipe.schedule"),
        default=None,
        help="delayed (F,J,J…) | joint | frozen | joint_then_frozen | an explicit list such as F,J,J",
    )
    p.add_argument("--pipeline", choices=PIPELINES, default=None)
    p.add_argument(
        "--warm-start",
        type=config_type("recipe.warm_start"),
        default=None,
        help="PATH to a checkpoint | champion (the registry's, if any) | base (the registry's base"
        " model, ranker pretrain) | none",
    )
    p.add_argument(
        "--warm-start-optimizer",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="carry the warm start's table-optimizer state (row-wise Adagrad sums) instead of"
        " starting it empty",
    )
    p.add_argument(
        "--incremental",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="continue the champion on only the days after its window (needs --warm-start champion)",
    )
    p.add_argument(
        "--full-retrain-every-days",
        type=config_type("recipe.full_retrain_every_days"),
        default=None,
        metavar="K",
        help="with --incremental: a full retrain every K days since the last one (unset: never)",
    )
    p.add_argument(
        "--full-retrain-warm-start",
        type=config_type("recipe.full_retrain_warm_start"),
        default=None,
        help="what a full retrain of an incremental recipe starts from",
    )
    p.add_argument(
        "--warm-start-scope",
        choices=WARM_START_SCOPES,
        default=None,
        help="what the warm start loads: all weights or the dense layers only (fresh tables)",
    )
    p.add_argument(
        "--remedy",
        choices=REMEDIES,
        default=None,
        help="epoch-start remedy: meda = tables and their optimizer state back to the seed's init "
        "each epoch, dense layers kept",
    )
    p.add_argument("--out", type=path_str, default=None, help="run folder (default <home>/runs/<run id>)")
    p.add_argument(
        "--resume", action="store_true", help="continue the run in --out after its last complete epoch"
    )
    p.add_argument("--nproc", type=workers_int, default=1, help="processes (torchrun on this machine)")
    p.add_argument("--seed", type=config_type("recipe.seed"), default=None)
    p.add_argument(
        "--batch-size", type=config_type("recipe.batch_size"), default=None, help="global batch size"
    )
    p.add_argument(
        "--shuffle-buffer",
        type=int_in(0, MAX_SHUFFLE_ROWS),
        default=None,
        help=f"rows in the shuffle buffer per rank (default {TrainConfig.shuffle_buffer_rows})",
    )
    p.add_argument("--model-config", type=path_arg, default=None, help="ModelConfig as JSON or YAML")
    p.add_argument(
        "--history-features",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the model also reads the user x pin and user x category history columns (the built-in"
        " model's dense features; a --model-config file names its own, which must agree)",
    )
    p.add_argument(
        "--threads",
        type=workers_int,
        default=None,
        help="CPU threads per process (sets OMP_NUM_THREADS before torch loads; default $OMP_NUM_THREADS, else 1)",
    )
    p.add_argument("--no-eval-each-epoch", action="store_true", help="evaluate only the final model")
    p.add_argument("--no-register", action="store_true", help="do not register the run in the model registry")
    p.add_argument("--no-progress", action="store_true", help="no progress bar / progress log lines")
    p.set_defaults(handler=_train, step="train")


def train_job(args: argparse.Namespace) -> TrainJob:
    """The typed request of a ``ranker train`` command line: the recipe flags are bound to their
    config keys, so the effective config carries them (ranking.config.requests.train_job)."""
    from ranking.config.requests import train_job as job_from_config

    return job_from_config(
        effective_config(args),
        workspace(args),
        args.end,
        run_id=args.run_id,
        out=Path(args.out) if args.out else None,
        resume=args.resume,
        nproc=args.nproc,
        threads=args.threads,
        eval_each_epoch=not args.no_eval_each_epoch,
        register=not args.no_register,
        progress=not args.no_progress,
        shuffle_buffer=args.shuffle_buffer,
    )


def _train(args: argparse.Namespace) -> CommandResult:
    import time

    from ranking.core.summaries import TrainSummary
    from ranking.pipeline.steps import train

    started = time.time()
    job = train_job(args)
    result = train(job)
    # a run of its own (experiment ranker-train; a pipeline's train step is part of its run's
    # record); a worker rank has no summary: the launcher's process tracks the run, once
    if isinstance(result.summary, TrainSummary):
        from ranking.tracking.hooks import track_train

        track_train(job.workspace, effective_config(args), result.summary, started=started)
    return result
