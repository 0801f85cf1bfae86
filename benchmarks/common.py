"""What several benchmarks share: the synthetic window they train on and the timed epoch of the
trainer's stack (``benchmarks.train``, ``baseline``, ``input``, ``lookup_profile``)."""

from __future__ import annotations

import datetime as dt
import statistics
import time
from pathlib import Path
from typing import Any

END = dt.date(2026, 11, 10)  # the synthetic window's end (its eval day)


def write_synthetic_window(home: Path, rows: int, days: int, seed: int = 3) -> Path:
    """A seeded window of ``rows`` training rows over ``days`` days ending ``END``; its manifest."""
    from features.windowgen import write_window

    return write_window(home, END, days, rows // days, seed=seed, row_group_size=50_000, eval_rows=1000)


def synthetic_window(home: Path, rows: int, days: int, seed: int = 3) -> Any:
    """:func:`write_synthetic_window`, read back as the trainer's ``WindowManifest``."""
    from features.window import read_window_manifest

    return read_window_manifest(write_synthetic_window(home, rows, days, seed))


def timed_epoch(
    stack: Any, batches: list[Any], phase: str, pipeline: str, timing: bool = True
) -> dict[str, float]:
    """One epoch of ``batches`` through the trainer's CPU pipeline: samples/s, the lookup shares
    and each timed section per step (ms)."""
    from ranking.trainer.distributed.pipelines import CpuPipeline
    from ranking.trainer.distributed.timing import SectionClock
    from ranking.trainer.schedule import FROZEN

    frozen = phase == FROZEN
    stack.task.model.embeddings_frozen = frozen
    clock = SectionClock(enabled=timing)
    rows = sum(len(b) for b in batches)
    start = time.perf_counter()
    CpuPipeline(stack.dmp, stack.optimizer, clock, semisync=pipeline == "semisync").run_epoch(
        iter(batches), frozen, lambda loss, n: None
    )
    seconds = time.perf_counter() - start
    share = clock.share(seconds)
    steps = len(batches)
    out = {
        "samples_per_second": rows / seconds,
        "lookup_ratio": share.lookup_ratio,
        "exposed_lookup_ratio": share.exposed_lookup_ratio,
        "step_ms": seconds / steps * 1e3,
    }
    out.update({f"{name}_ms": v / steps * 1e3 for name, v in clock.resolve().items()})
    return out


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the runs (a figure a run lacks counts as 0)."""
    return {k: statistics.median(r.get(k, 0.0) for r in runs) for k in runs[0]}
