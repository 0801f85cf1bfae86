"""``ranker train``.

One entry point for every scale: ``ranker train`` runs in this process (CPU or one GPU); with
``--nproc N`` it launches itself under torchrun (``torch.distributed.run``, gloo on CPU, nccl on
GPU) and relays rank 0's summary; launched by an external ``torchrun -m ranking.cli train ...``
(multi-node) every rank trains and rank 0 reports. Heavy imports happen inside the handlers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from ranking.cli.common import CommandResult, add_common, parse_date, positive_int, workspace
from ranking.core.errors import RankerError, TrainingFailed
from ranking.core.ids import validate_run_id
from ranking.core.workspace import Workspace

log = logging.getLogger(__name__)

MAX_NPROC = 64


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``train`` to ``ranker``."""
    p = sub.add_parser("train", help="train the ranker on a window (delayed-embedding multi-epoch)")
    add_common(p)
    p.add_argument("--end", type=parse_date, required=True, help="window end (exclusive); the eval day")
    p.add_argument("--days", type=positive_int, default=20, help="window length in days (default 20)")
    p.add_argument(
        "--epochs", type=positive_int, default=None, help="epochs (default 3, or the list's length)"
    )
    p.add_argument(
        "--schedule",
        default="delayed",
        help="delayed (F,J,J…) | joint | frozen | joint_then_frozen | an explicit list such as F,J,J",
    )
    p.add_argument("--pipeline", choices=("semisync", "sync"), default="semisync")
    p.add_argument(
        "--warm-start",
        default="champion",
        help="PATH to a checkpoint | champion (the registry's, if any) | none (default champion)",
    )
    p.add_argument(
        "--warm-start-scope",
        choices=("all", "dense"),
        default="all",
        help="what the warm start loads: all weights (default) or the dense layers only (fresh tables)",
    )
    p.add_argument("--out", default=None, help="run folder (default <home>/runs/<run id>)")
    p.add_argument(
        "--resume", action="store_true", help="continue the run in --out after its last complete epoch"
    )
    p.add_argument("--nproc", type=positive_int, default=1, help="processes (torchrun on this machine)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=positive_int, default=1024, help="global batch size (default 1024)")
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


# ---------------------------------------------------------------------------------- train


def _run_dir(ws: Workspace, args: argparse.Namespace) -> Path:
    if args.out:
        return Path(args.out).expanduser().resolve()
    run_id = args.run_id or f"{args.end.isoformat()}_{args.days}d-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    return ws.runs / validate_run_id(run_id)


def _resolve_warm_start(ws: Workspace, value: str) -> tuple[Path | None, str]:
    if value == "none":
        return None, "none"
    if value == "champion":
        from ranking.registry.store import champion_checkpoint

        path = champion_checkpoint(ws)
        if path is None:
            log.info("no champion yet: training from scratch")
            return None, "champion (none yet: from scratch)"
        return Path(path), "champion"
    path = Path(value).expanduser().resolve()
    if path.is_dir():
        path = path / "model.pt"
    if not path.is_file():
        raise RankerError(f"--warm-start: no checkpoint at {path} (give a path, 'champion' or 'none')")
    return path, "path"


def _model_config(args: argparse.Namespace, run_dir: Path, warm: Path | None) -> Any:
    return _with_config_optimizers(args, _base_model_config(args, run_dir, warm))


def _base_model_config(args: argparse.Namespace, run_dir: Path, warm: Path | None) -> Any:
    from ranking.trainer.config import default_model_config, load_model_config

    if args.model_config is not None:
        return load_model_config(Path(args.model_config))
    if args.resume and (run_dir / "model_config.json").is_file():
        return load_model_config(run_dir / "model_config.json")
    if warm is not None:
        from ranking.trainer.checkpoint import load_checkpoint
        from ranking.trainer.scoring import model_config_of

        return model_config_of(warm, load_checkpoint(warm))
    return default_model_config()


def _with_config_optimizers(args: argparse.Namespace, model_config: Any) -> Any:
    """The pipeline config's ``recipe.table_optimizer`` / ``dense_optimizer`` replace the model
    config's (a warm start's included: optimizers are not part of the architecture)."""
    import dataclasses

    from ranking.cli.config import effective_config
    from ranking.trainer.config import OptimizerConfig

    recipe = effective_config(args).config.recipe
    changes = {
        name: OptimizerConfig(**section.model_dump())
        for name, section in (
            ("table_optimizer", recipe.table_optimizer),
            ("dense_optimizer", recipe.dense_optimizer),
        )
        if section is not None
    }
    return dataclasses.replace(model_config, **changes) if changes else model_config


def _record_effective_config(args: argparse.Namespace, run_dir: Path) -> Path:
    """``effective_config.json`` beside the run's manifest: the config and each value's source
    (the registry keeps it with the version)."""
    from ranking.cli.config import effective_config
    from ranking.core.atomic import atomic_write_json

    path = run_dir / "effective_config.json"
    atomic_write_json(path, effective_config(args).to_dict())
    return path


def _env_threads() -> int | None:
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


def _current_feature_version() -> str:
    """The version (hash) of this checkout's feature definitions: a window built with others is
    refused before training."""
    from features.feast_repo import feature_version

    return feature_version()


def _launch(args: argparse.Namespace, ws: Workspace, run_dir: Path, warm: Path | None) -> dict[str, Any]:
    """Run the same command under torchrun with N workers; return rank 0's summary."""
    from ranking.core.atomic import read_json
    from ranking.trainer.distributed import torchrun_command

    if args.nproc > MAX_NPROC:
        raise RankerError(f"--nproc {args.nproc} exceeds {MAX_NPROC}")
    run_dir.mkdir(parents=True, exist_ok=True)
    summary_file = run_dir / ".launch-summary.json"
    summary_file.unlink(missing_ok=True)
    argv = [
        "train",
        f"--home={ws.root}",
        f"--end={args.end.isoformat()}",
        f"--days={args.days}",
        f"--schedule={args.schedule}",
        f"--pipeline={args.pipeline}",
        f"--warm-start={warm if warm is not None else 'none'}",
        f"--warm-start-scope={args.warm_start_scope}",
        f"--out={run_dir}",
        f"--seed={args.seed}",
        f"--batch-size={args.batch_size}",
        f"--shuffle-buffer={args.shuffle_buffer}",
        "--no-register",
        f"--summary-file={summary_file}",
    ]
    if args.config is not None:  # the workers read the same pipeline config (its optimizers)
        argv.append(f"--config={Path(args.config).resolve()}")
    if args.epochs is not None:
        argv.append(f"--epochs={args.epochs}")
    if args.threads is not None:
        argv.append(f"--threads={args.threads}")
    if args.model_config is not None:
        argv.append(f"--model-config={Path(args.model_config).resolve()}")
    for flag in ("resume", "no_eval_each_epoch", "no_progress"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    cmd = torchrun_command(args.nproc, argv)
    log.info("launching %d workers: %s", args.nproc, " ".join(cmd))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, env=env, check=False)
    if proc.returncode != 0:
        raise TrainingFailed(f"torchrun workers failed (exit {proc.returncode}); see their errors above")
    if not summary_file.is_file():
        raise TrainingFailed(f"torchrun workers finished without a summary ({summary_file})")
    summary: dict[str, Any] = read_json(summary_file)
    summary_file.unlink(missing_ok=True)
    return summary


def _train(args: argparse.Namespace) -> CommandResult:
    from ranking.trainer.config import TrainConfig
    from ranking.trainer.data import read_window_manifest, window_manifest_path
    from ranking.trainer.distributed import launched_by_torchrun
    from ranking.trainer.schedule import resolve_schedule

    started = time.perf_counter()
    # OpenMP reads OMP_NUM_THREADS when torch loads (handlers import torch lazily: not yet). On the
    # shared 2-core box one thread ran 31k samples/s, two 4-7k, torch's default 0.5-1k
    # (docs/training.md): default 1 unless the caller set OMP_NUM_THREADS or --threads.
    args.threads = args.threads or _env_threads() or 1
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    ws = workspace(args)
    schedule = resolve_schedule(args.schedule, args.epochs)
    run_dir = _run_dir(ws, args)
    if args.summary_file is not None and Path(args.summary_file).resolve().parent != run_dir:
        raise RankerError("--summary-file must lie in the run folder")
    manifest = read_window_manifest(window_manifest_path(ws, args.end, args.days))
    warm, source = _resolve_warm_start(ws, args.warm_start)

    if args.nproc > 1 and not launched_by_torchrun():
        from ranking.trainer.data import validate_window

        # user errors surface here as one line, not as N failed workers
        validate_window(manifest, _model_config(args, run_dir, warm), _current_feature_version())
        summary = _launch(args, ws, run_dir, warm)
        summary["warm_start"]["source"] = source
    else:
        from ranking.trainer.loop import TrainRequest, run_training

        request = TrainRequest(
            manifest=manifest,
            model_config=_model_config(args, run_dir, warm),
            train_config=TrainConfig(
                schedule=schedule,
                schedule_spec=args.schedule,
                pipeline=args.pipeline,
                batch_size=args.batch_size,
                shuffle_buffer_rows=args.shuffle_buffer,
                seed=args.seed,
                eval_each_epoch=not args.no_eval_each_epoch,
            ),
            run_dir=run_dir,
            warm_start=warm,
            warm_start_source=source,
            warm_start_scope=args.warm_start_scope,
            resume=args.resume,
            expected_feature_version=_current_feature_version(),
            progress=not args.no_progress,
            threads=args.threads,
        )
        summary = run_training(request)
        if not summary:  # a non-zero rank: rank 0 reports
            return CommandResult(quiet=True)
        if args.summary_file is not None:
            from ranking.core.atomic import atomic_write_json

            atomic_write_json(args.summary_file, summary)
            return CommandResult(quiet=True)

    summary["effective_config"] = str(_record_effective_config(args, run_dir))
    summary["version"] = None
    if not args.no_register:
        from ranking.registry.store import register_run

        summary["version"] = register_run(ws, run_dir, args.run_id)
    summary["duration_seconds"] = time.perf_counter() - started
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
