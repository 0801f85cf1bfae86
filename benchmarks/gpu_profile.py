"""Where a training step's time goes on the device: ``python -m benchmarks.gpu_profile --manifest M``.

For each pipeline (sync, semisync) and each feed (the inline input path, the input pipeline with
its background thread and cache), one joint epoch runs under ``torch.profiler`` (CPU + CUDA):

- ``samples_per_second`` of the profiled steps;
- ``device_busy_ratio``: the union of the device's kernel, copy and memset intervals over the
  profiled steps' wall time (how much of a step the GPU computes; None on CPU);
- ``input_wait_ratio``: the share of the step the training thread spent waiting for its next
  batch (the input path on the critical path);
- ``top_host_ops``: the training thread's heaviest operators by self CPU time.

benchmarks/gpu.sh runs it on a GPU machine (gpu.json ``profile``); on CPU it runs the same code
without device figures (tests/smoke/test_gpu_profile.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by [start, end) intervals (microseconds in, seconds out)."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(intervals):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total / 1e6


def device_busy(trace: dict[str, Any]) -> tuple[float, float] | None:
    """(device busy seconds, profiled wall seconds) from a chrome trace of torch.profiler; None
    without device events. Wall: the ProfilerStep ranges of the active steps."""
    events = trace.get("traceEvents", [])
    device = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES
    ]
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    if not device or not steps:
        return None
    lo, hi = min(s for s, _ in steps), max(e for _, e in steps)
    inside = [(max(a, lo), min(b, hi)) for a, b in device if b > lo and a < hi]
    return union_seconds(inside), (hi - lo) / 1e6


class TimedFeed:
    """Batches as the step loop asks for them, timing the wait for each."""

    def __init__(self, batches: Iterator[Any], device: Any) -> None:
        self.batches, self.device, self.waited = batches, device, 0.0

    def __iter__(self) -> Iterator[Any]:
        while True:
            start = time.perf_counter()
            batch = next(self.batches, None)
            self.waited += time.perf_counter() - start
            if batch is None:
                return
            yield batch


def profile_epoch(
    stack: Any, manifest: Any, cfg: Any, pipeline: str, feed: str, args: Any, ctx: Any
) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from ranking.trainer.datasets.input import InputOptions, default_cache_root, ready_batches
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
    from ranking.trainer.distributed.pipelines import CpuPipeline, run_torchrec_epoch, torchrec_pipeline
    from ranking.trainer.distributed.timing import SectionClock

    cuda = ctx.device.type == "cuda"
    plan = plan_epoch(list_units([p.path for p in manifest.train]), 1, args.batch_size, seed=0, epoch=2)
    if feed == "inline":
        source: Iterator[Any] = train_batches(plan, 0, cfg, 100_000, 0, 2)
    else:
        options = InputOptions(pin_memory=cuda)
        source = ready_batches(plan, 0, cfg, 100_000, 0, 2, options, default_cache_root(manifest.path))
    timed = TimedFeed(source, ctx.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    active = max(1, min(args.steps, plan.steps - 4))
    clock = SectionClock(enabled=False, cuda=cuda)
    rows = 0
    with profile(activities=activities, schedule=schedule(wait=2, warmup=2, active=active)) as prof:
        start = time.perf_counter()

        def on_step(loss: Any, n: int) -> None:
            nonlocal rows
            rows += n
            prof.step()

        stack.task.model.embeddings_frozen = False
        if cuda and pipeline == "semisync":
            run_torchrec_epoch(
                torchrec_pipeline(stack.dmp, stack.optimizer, ctx.device, clock, False), iter(timed), on_step
            )
        else:
            batches = (b.to(ctx.device, non_blocking=True) for b in timed) if cuda else iter(timed)
            CpuPipeline(stack.dmp, stack.optimizer, clock, semisync=pipeline == "semisync").run_epoch(
                batches, False, on_step
            )
        if cuda:
            torch.cuda.synchronize(ctx.device)
        seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        trace_file = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace_file))
        busy = device_busy(json.loads(trace_file.read_text()))
    top = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:10]
    return {
        "steps": plan.steps,
        "samples_per_second": rows / seconds,
        "device_busy_ratio": busy[0] / busy[1] if busy else None,
        "input_wait_ratio": timed.waited / seconds,
        "top_host_ops": [{"name": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3} for e in top],
    }


def main(argv: list[str]) -> int:
    import logging
    import warnings

    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_profile")
    parser.add_argument("--manifest", type=Path, required=True, help="a window manifest (gpu.sh writes one)")
    parser.add_argument("--model-config", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=32768)
    parser.add_argument("--steps", type=int, default=20, help="profiled steps per epoch")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)

    from features.window import read_window_manifest
    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.loop import build_sharded
    from ranking.trainer.models.config import load_model_config

    manifest = read_window_manifest(args.manifest)
    cfg = load_model_config(args.model_config)
    ctx = distributed.init_distributed()
    report: dict[str, Any] = {"device": ctx.device.type, "batch_size": args.batch_size, "runs": {}}
    try:
        stack = build_sharded(cfg, seed=0, ctx=ctx)
        for pipeline in ("sync", "semisync"):
            for feed in ("inline", "pipeline"):
                name = f"{pipeline}/{feed}"
                report["runs"][name] = profile_epoch(stack, manifest, cfg, pipeline, feed, args, ctx)
                r = report["runs"][name]
                busy = "n/a" if r["device_busy_ratio"] is None else f"{r['device_busy_ratio']:.0%}"
                print(f"{name}: {r['samples_per_second']:,.0f} samples/s, device busy {busy}, "
                      f"input wait {r['input_wait_ratio']:.0%}", flush=True)  # fmt: skip
    finally:
        distributed.shutdown(ctx)
    runs = report["runs"]
    report["semisync_over_sync"] = {
        feed: runs[f"semisync/{feed}"]["samples_per_second"] / runs[f"sync/{feed}"]["samples_per_second"]
        for feed in ("inline", "pipeline")
    }
    report["pipeline_over_inline"] = {
        p: runs[f"{p}/pipeline"]["samples_per_second"] / runs[f"{p}/inline"]["samples_per_second"]
        for p in ("sync", "semisync")
    }
    text = json.dumps(report, indent=2)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
