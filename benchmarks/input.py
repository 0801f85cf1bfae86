"""Input-pipeline benchmark: ``python -m benchmarks.input [--rows N] [--repeats R] [--json-out F]``.

Measured in one run, on the same window, against the inline path it replaces
(``ranking.trainer.datasets.window.train_batches``: decode + shuffle + cut in the training process):
- **streaming rate**: rows/s of a whole epoch made into ready ``TrainBatch`` es, for the inline
  path and the input pipeline (``ranking.trainer.datasets.input.ready_batches``) with its encoded cache
  cold (every row group decoded: inline, or in 1 worker process) and warm (memory-mapped);
- **training**: CPU samples/s of streamed joint epochs (semi-sync, one process) fed by the inline
  path vs by the input pipeline (warm cache, background thread), on the same model.

Medians over ``--repeats`` rounds, configurations interleaved in each round so a shared machine's
load drift hits all alike; ratios are per-round ratios against the inline path, then medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _drain(batches: Iterator[Any]) -> int:
    return sum(len(b) for b in batches)


def _rate(make: Callable[[], Iterator[Any]], rows: int) -> float:
    start = time.perf_counter()
    seen = _drain(make())
    seconds = time.perf_counter() - start
    if seen != rows:
        raise RuntimeError(f"streamed {seen} rows, the plan has {rows}")
    return rows / seconds


def main(argv: list[str]) -> int:
    import logging
    import warnings

    parser = argparse.ArgumentParser(prog="python -m benchmarks.input")
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows of the window (4 days)")
    parser.add_argument("--batch-size", type=int, default=4096, help="batch of the streaming measurement")
    parser.add_argument("--train-rows", type=int, default=200_000, help="rows of the training epochs")
    parser.add_argument("--train-batch-size", type=int, default=1024)
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch loads (docs: 30-50x on this box)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)

    from benchmarks.common import synthetic_window
    from ranking.trainer.datasets.input import InputOptions, ready_batches
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
    from ranking.trainer.models.config import default_model_config

    cfg = default_model_config(embedding_dim=args.embedding_dim)
    buffer = 100_000  # TrainConfig's default shuffle buffer
    report: dict[str, Any] = {
        "config": {
            "rows": args.rows,
            "batch_size": args.batch_size,
            "row_group_rows": 50_000,
            "shuffle_buffer_rows": buffer,
            "repeats": args.repeats,
            "cores": os.cpu_count(),
        }
    }
    with tempfile.TemporaryDirectory(prefix="bench-input-") as tmp:
        home = Path(tmp)
        manifest = synthetic_window(home, args.rows, days=4)
        units = list_units([p.path for p in manifest.train])
        plan = plan_epoch(units, 1, args.batch_size, seed=0, epoch=1)
        cache = home / "cache"
        warm = InputOptions(workers=1, prefetch_batches=4)
        inline = lambda: train_batches(plan, 0, cfg, buffer, 0, 1)  # noqa: E731

        def cold(workers: int) -> Callable[[], Iterator[Any]]:
            def make() -> Iterator[Any]:
                shutil.rmtree(cache, ignore_errors=True)
                return ready_batches(
                    plan, 0, cfg, buffer, 0, 1, InputOptions(workers=workers, worker_min_rows=0), cache
                )

            return make

        configs: dict[str, Callable[[], Iterator[Any]]] = {
            "inline": inline,
            # the defaults: below WORKER_MIN_ROWS misses are decoded in the loader thread
            "pipeline_cold_inline_decode": cold(0),
            # one decode process forced at any size: its spawn and imports (~1-2 s) against the rows
            "pipeline_cold_1_worker_forced": cold(1),
            "pipeline_warm": lambda: ready_batches(plan, 0, cfg, buffer, 0, 1, warm, cache),
        }
        _drain(inline())  # warm-up: imports (torchrec), page cache
        samples: dict[str, list[float]] = {name: [] for name in configs}
        for r in range(args.repeats):
            for name, make in configs.items():  # warm runs after a cold one: the cache is full
                samples[name].append(_rate(make, plan.rows))
            print(
                f"round {r + 1}/{args.repeats}: "
                + ", ".join(f"{k} {v[-1] / 1e6:.2f}M" for k, v in samples.items()),
                flush=True,
            )
        report["streaming_rows_per_second"] = {k: statistics.median(v) for k, v in samples.items()}
        report["streaming_over_inline"] = {
            k: statistics.median(a / b for a, b in zip(v, samples["inline"], strict=True))
            for k, v in samples.items()
            if k != "inline"
        }
        import numpy as np

        data_bytes = sum(np.load(p, mmap_mode="r").nbytes for p in cache.glob("*.npy"))
        report["cache_bytes_per_row"] = data_bytes / plan.rows  # the arrays, without .npy headers
        report["training"] = _training(home, args, cfg)
    print(json.dumps(report, indent=2))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _training(home: Path, args: argparse.Namespace, cfg: Any) -> dict[str, Any]:
    """Streamed joint semi-sync epochs on one CPU process, fed inline vs by the pipeline."""
    from benchmarks.common import synthetic_window
    from ranking.trainer.datasets.input import InputOptions, ready_batches
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.distributed.pipelines import CpuPipeline
    from ranking.trainer.distributed.timing import SectionClock
    from ranking.trainer.loop import build_sharded

    manifest = synthetic_window(home / "train", args.train_rows, days=4, seed=4)
    units = list_units([p.path for p in manifest.train])
    cache = home / "train-cache"
    ctx = distributed.init_distributed(prefer_cuda=False)
    try:
        stack = build_sharded(cfg, seed=0, ctx=ctx)
        stack.task.model.embeddings_frozen = False
        options = InputOptions(workers=1, prefetch_batches=4)

        def epoch(feed: str, e: int) -> float:
            plan = plan_epoch(units, 1, args.train_batch_size, seed=0, epoch=e)
            if feed == "inline":
                batches: Iterator[Any] = train_batches(plan, 0, cfg, 100_000, 0, e)
            else:
                batches = ready_batches(plan, 0, cfg, 100_000, 0, e, options, cache)
            start = time.perf_counter()
            CpuPipeline(stack.dmp, stack.optimizer, SectionClock(), semisync=True).run_epoch(
                batches, False, lambda loss, n: None
            )
            return plan.rows / (time.perf_counter() - start)

        epoch("pipeline", 1)  # fills the cache and warms the model (first-call allocations)
        samples: dict[str, list[float]] = {"inline": [], "pipeline": []}
        for r in range(args.repeats):
            for feed in samples:
                samples[feed].append(epoch(feed, 2 + r))
        return {
            "rows": args.train_rows,
            "batch_size": args.train_batch_size,
            "samples_per_second": {k: statistics.median(v) for k, v in samples.items()},
            "pipeline_over_inline": statistics.median(
                a / b for a, b in zip(samples["pipeline"], samples["inline"], strict=True)
            ),
        }
    finally:
        distributed.shutdown(ctx)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
