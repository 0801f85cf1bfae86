"""Trainer benchmark: ``python -m benchmarks.train [--rows N] [--repeats R] [--rss-rows A,B]``.

Measured in one run, on the same model and batches (medians over ``--repeats`` epochs):
- samples/s of a frozen vs a joint epoch (ratio), sync and semi-sync pipelines
- embedding-lookup share of step time by phase, and the exposed share with semi-sync
- semi-sync vs sync samples/s (ratio)
- measuring overhead: joint epoch with the section timers on vs off (ratio)
- embedding gather throughput (fused fbgemm lookup, bytes of rows read per second) vs memcpy
  bandwidth (torch copy of a large tensor), same process
- peak RSS of streaming a whole window into batches at two window lengths (fresh processes)
- the step broken into sections (lookup, dense forward/backward/optimizer) and the most a frozen
  epoch could gain over a joint one from it
- the plain-PyTorch baseline on the same window (benchmarks/baseline.py): 1 and 2 processes

Throughput epochs train on batches decoded beforehand, so parquet reading (identical for every
configuration) does not blur the ratios; one streamed epoch is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import END, median_of, synthetic_window, timed_epoch


def _epoch_batches(manifest: Any, cfg: Any, batch_size: int) -> list[Any]:
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches

    plan = plan_epoch(list_units([p.path for p in manifest.train]), 1, batch_size, seed=0, epoch=1)
    return list(train_batches(plan, 0, cfg, 100_000, seed=0, epoch=1))


def _frozen_limit(joint: dict[str, float]) -> dict[str, float]:
    """What a frozen epoch could gain at most over this joint step: skipping the table backward
    (+ fused update), and, beyond what any schedule can skip, a lookup forward that cost nothing."""
    step = joint["step_ms"]
    backward = joint.get("lookup_backward_ms", 0.0)
    forward = (
        joint.get("lookup_forward_ms", 0.0)
        + joint.get("lookup_issue_ms", 0.0)
        + joint.get("lookup_wait_ms", 0.0)
    )
    return {
        "skip_table_backward": step / (step - backward),
        "skip_table_backward_and_free_lookup": step / (step - backward - forward),
    }


def _gather_vs_memcpy(stack: Any, batches: list[Any], cfg: Any, repeats: int) -> dict[str, float]:
    import torch

    from ranking.trainer.distributed.pipelines import EmbeddingInjector

    dims = sum(t.embedding_dim for t in cfg.tables)
    lookup = EmbeddingInjector(stack.task.model.sparse_arch).lookup
    rates = []
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            rows = 0
            for b in batches:
                lookup(b.sparse_features).wait()
                rows += len(b)
            rates.append(rows * dims * 4 / (time.perf_counter() - start))
    src = torch.randn(64 * 1024 * 1024 // 4)
    dst = torch.empty_like(src)
    copies = []
    for _ in range(max(5, repeats)):
        start = time.perf_counter()
        dst.copy_(src)
        copies.append(src.numel() * 4 / (time.perf_counter() - start))
    gather = statistics.median(rates)
    memcpy = statistics.median(copies)
    return {
        "gather_bytes_per_second": gather,
        "memcpy_bytes_per_second": memcpy,
        "gather_over_memcpy": gather / memcpy,
    }


def _kjt_build(cfg: Any, batch_size: int, repeats: int = 15) -> dict[str, float]:
    """Building a batch's KeyedJaggedTensor: ``to_train_batch`` (per-key lengths given) against
    ``KeyedJaggedTensor.from_lengths_sync`` (what it did before: computes them from the lengths
    tensor), same ids; medians of per-round means over 200 builds."""
    import numpy as np
    import torch
    from torchrec import KeyedJaggedTensor

    from ranking.trainer.datasets.window import Chunk, to_train_batch

    rng = np.random.default_rng(0)
    ids = np.stack([rng.integers(0, t.num_embeddings, batch_size) for t in cfg.tables], axis=1)
    chunk = Chunk(
        ids=ids,
        dense=np.zeros((batch_size, len(cfg.dense_features)), dtype=np.float32),
        labels=np.zeros(batch_size, dtype=np.float32),
    )
    keys = list(cfg.sparse_features)

    def before() -> Any:
        return KeyedJaggedTensor.from_lengths_sync(
            keys=keys,
            values=torch.from_numpy(np.ascontiguousarray(ids.T).reshape(-1)),
            lengths=torch.ones(batch_size * len(keys), dtype=torch.int32),
        )

    def after() -> Any:
        return to_train_batch(chunk, cfg, 1.0).sparse_features

    times: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(repeats):
        for name, build in (("before", before), ("after", after)):
            start = time.perf_counter()
            for _ in range(200):
                build()
            times[name].append((time.perf_counter() - start) / 200 * 1e6)
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    return {"from_lengths_sync_us": b, "to_train_batch_us": a, "after_over_before": a / b}


_RSS_CHILD = r"""
import json, sys
from pathlib import Path
from ranking.trainer.models.config import default_model_config
from features.window import read_window_manifest
from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
import torch, torchrec  # the trainer's imports: part of the baseline

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

m = read_window_manifest(Path(sys.argv[1]))
cfg = default_model_config()
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
plan = plan_epoch(list_units([p.path for p in m.train]), 1, 1024, seed=0, epoch=1)
rows = sum(len(b) for b in train_batches(plan, 0, cfg, 100_000, seed=0, epoch=1))
peak = status("VmHWM")
print(json.dumps({"rows": rows, "baseline_rss_bytes": base, "peak_rss_bytes": peak, "streaming_rss_bytes": peak - base}))
"""


def _rss(home: Path, rows: int, days: int) -> dict[str, Any]:
    manifest = synthetic_window(home, rows, days, seed=5)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(manifest.path)], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["stream_seconds"] = time.perf_counter() - t0
    return result


def _two_process(home: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`ranker train --nproc 2` (gloo, tables sharded over both ranks), sync vs semisync, on the
    same window: the all-to-all is where semi-sync can overlap on CPU."""
    import os

    out: dict[str, Any] = {}
    cfg_path = home / "bench_model_config.json"
    from ranking.trainer.models.config import default_model_config

    cfg_path.write_text(default_model_config(embedding_dim=args.embedding_dim).to_json())
    ranker = str(Path(sys.executable).with_name("ranker"))
    for pipeline in ("sync", "semisync"):
        proc = subprocess.run(
            [
                ranker,
                "train",
                "--home",
                str(home),
                "--end",
                END.isoformat(),
                "--days",
                "4",
                "--schedule",
                "F,J,J",
                "--pipeline",
                pipeline,
                "--nproc",
                "2",
                "--warm-start",
                "none",
                "--no-register",
                "--json",
                "--no-progress",
                "--no-eval-each-epoch",
                "--model-config",
                str(cfg_path),
                "--batch-size",
                str(args.batch_size),
                "--out",
                str(home / f"two-{pipeline}"),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "OMP_NUM_THREADS": "1", "RANKER_LOG_LEVEL": "WARNING"},
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ranker train --nproc 2 failed: {proc.stderr[-2000:]}")
        s = json.loads(proc.stdout)
        out[pipeline] = {
            "samples_per_second_by_epoch": [e["samples_per_second"] for e in s["epochs"]],
            "lookup_ratio_by_phase": s["lookup_ratio_by_phase"],
            "exposed_lookup_ratio_by_phase": s["exposed_lookup_ratio_by_phase"],
            "sharding": s["sharding"],
        }
    joint = {p: statistics.median(out[p]["samples_per_second_by_epoch"][1:]) for p in ("sync", "semisync")}
    out["semisync_over_sync_joint"] = joint["semisync"] / joint["sync"]
    return out


def _streamed_epoch(stack: Any, manifest: Any, cfg: Any, batch_size: int) -> float:
    """Samples/s of one joint semi-sync epoch streamed from parquet, end to end (read + decode +
    shuffle + train)."""
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
    from ranking.trainer.distributed.pipelines import CpuPipeline
    from ranking.trainer.distributed.timing import SectionClock

    plan = plan_epoch(list_units([p.path for p in manifest.train]), 1, batch_size, seed=0, epoch=2)
    stack.task.model.embeddings_frozen = False
    t0 = time.perf_counter()
    CpuPipeline(stack.dmp, stack.optimizer, SectionClock(), semisync=True).run_epoch(
        train_batches(plan, 0, cfg, 100_000, seed=0, epoch=2), False, lambda loss, n: None
    )
    return float(plan.rows / (time.perf_counter() - t0))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.train")
    parser.add_argument("--rows", type=int, default=60_000, help="training rows for the throughput epochs")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared machine)"
    )
    parser.add_argument(
        "--rss-rows", default="1000000,4000000", help="two window lengths (rows) for peak RSS"
    )
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument(
        "--no-two-process", dest="two_process", action="store_false", help="skip the --nproc 2 runs"
    )
    parser.add_argument(
        "--no-baseline", dest="baseline", action="store_false", help="skip the plain-PyTorch baseline"
    )
    parser.add_argument("--baseline-nproc", default="1,2", help="process counts of the baseline comparison")
    return parser


def main(argv: list[str]) -> int:
    import logging
    import warnings

    args = _parser().parse_args(argv)
    # OpenMP reads this when torch loads; torch.set_num_threads alone left fbgemm's OpenMP pool
    # spinning on the loaded 2-core box (20x slower)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch

    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.loop import build_sharded
    from ranking.trainer.models.config import default_model_config
    from ranking.trainer.schedule import FROZEN, JOINT

    cfg = default_model_config(embedding_dim=args.embedding_dim)
    report: dict[str, Any] = {
        "config": {
            "rows": args.rows,
            "batch_size": args.batch_size,
            "embedding_dim": args.embedding_dim,
            "tables": {t.feature: t.num_embeddings for t in cfg.tables},
            "threads": torch.get_num_threads(),
            "repeats": args.repeats,
        }
    }
    ctx = distributed.init_distributed(prefer_cuda=False)
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        home = Path(tmp)
        manifest = synthetic_window(home, args.rows, days=4)
        batches = _epoch_batches(manifest, cfg, args.batch_size)
        stack = build_sharded(cfg, seed=0, ctx=ctx)
        timed_epoch(stack, batches, JOINT, "sync")  # warm-up: first-call allocations, thread pools
        # interleaved (one epoch of each configuration per round) so load drift on a shared
        # machine hits every configuration alike; medians over rounds
        configs = [
            (f"{phase}/{pipeline}", phase, pipeline, True)
            for pipeline in ("sync", "semisync")
            for phase in (FROZEN, JOINT)
        ]
        configs.append(("joint/sync/timers-off", JOINT, "sync", False))
        samples: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in configs}
        for _ in range(args.repeats):
            for name, phase, pipeline, timing in configs:
                samples[name].append(timed_epoch(stack, batches, phase, pipeline, timing))
        runs = {
            name: median_of(values) for name, values in samples.items() if not name.endswith("timers-off")
        }
        report["epochs"] = runs

        def paired(a: str, b: str) -> float:  # median over rounds of the per-round ratio
            return statistics.median(
                x["samples_per_second"] / y["samples_per_second"]
                for x, y in zip(samples[a], samples[b], strict=True)
            )

        report["ratios"] = {
            "frozen_over_joint_sync": paired("frozen/sync", "joint/sync"),
            "frozen_over_joint_semisync": paired("frozen/semisync", "joint/semisync"),
            "semisync_over_sync_joint": paired("joint/semisync", "joint/sync"),
            "semisync_over_sync_frozen": paired("frozen/semisync", "frozen/sync"),
            "timers_off_over_on_joint_sync": paired("joint/sync/timers-off", "joint/sync"),
        }
        report["frozen_limit_sync"] = _frozen_limit(runs["joint/sync"])
        report["gather"] = _gather_vs_memcpy(stack, batches, cfg, args.repeats)
        report["kjt_build"] = _kjt_build(cfg, args.batch_size)
        report["streamed_joint_semisync_samples_per_second"] = _streamed_epoch(
            stack, manifest, cfg, args.batch_size
        )
        distributed.shutdown(ctx)

        if args.two_process:
            report["two_process"] = _two_process(home, args)

        if args.baseline:
            from benchmarks import baseline

            flags = [
                f"--rows={args.rows}",
                f"--batch-size={args.batch_size}",
                f"--embedding-dim={args.embedding_dim}",
                f"--repeats={args.repeats}",
                f"--nproc={args.baseline_nproc}",
            ]
            report["baseline"] = baseline.compare(manifest.path, baseline.parser().parse_args(flags))

        small, large = (int(x) for x in args.rss_rows.split(","))
        report["rss"] = {
            "small": _rss(home / "rss-small", small, days=4),
            "large": _rss(home / "rss-large", large, days=16),
        }
        report["rss"]["peak_ratio_large_over_small"] = (
            report["rss"]["large"]["peak_rss_bytes"] / report["rss"]["small"]["peak_rss_bytes"]
        )
        report["rss"]["streaming_ratio_large_over_small"] = report["rss"]["large"][
            "streaming_rss_bytes"
        ] / max(1, report["rss"]["small"]["streaming_rss_bytes"])

    _print(report)
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0


def _print(r: dict[str, Any]) -> None:
    c = r["config"]
    print(
        f"config: {c['rows']:,} rows, batch {c['batch_size']}, dim {c['embedding_dim']}, {c['threads']} threads, "
        f"median of {c['repeats']} epochs"
    )
    print(f"{'epoch':18} {'samples/s':>10} {'lookup':>8} {'exposed':>8}")
    for name, e in r["epochs"].items():
        print(
            f"{name:18} {e['samples_per_second']:>10,.0f} {e['lookup_ratio']:>8.1%} {e['exposed_lookup_ratio']:>8.1%}"
        )
    for name, v in r["ratios"].items():
        print(f"ratio {name:32} {v:.3f}")
    for name in ("frozen/sync", "joint/sync"):
        e = r["epochs"][name]
        parts = ", ".join(f"{k[:-3]} {v:.2f}" for k, v in e.items() if k.endswith("_ms") and k != "step_ms")
        print(f"{name} step {e['step_ms']:.2f} ms: {parts}")
    lim = r["frozen_limit_sync"]
    print(
        f"frozen/joint limit (sync): skip table backward {lim['skip_table_backward']:.3f}, "
        f"and a free lookup {lim['skip_table_backward_and_free_lookup']:.3f}"
    )
    g = r["gather"]
    print(
        f"gather {g['gather_bytes_per_second'] / 1e9:.2f} GB/s vs memcpy {g['memcpy_bytes_per_second'] / 1e9:.2f} GB/s "
        f"(ratio {g['gather_over_memcpy']:.3f})"
    )
    print(f"streamed joint semisync epoch: {r['streamed_joint_semisync_samples_per_second']:,.0f} samples/s")
    k = r["kjt_build"]
    print(
        f"KJT per batch: from_lengths_sync {k['from_lengths_sync_us']:.1f} us, to_train_batch "
        f"{k['to_train_batch_us']:.1f} us (ratio {k['after_over_before']:.2f})"
    )
    for size in ("small", "large"):
        s = r["rss"][size]
        print(
            f"RSS {size}: {s['rows']:,} rows streamed in {s['stream_seconds']:.1f} s, peak "
            f"{s['peak_rss_bytes'] / 2**20:.0f} MiB = {s['baseline_rss_bytes'] / 2**20:.0f} MiB after imports + "
            f"{s['streaming_rss_bytes'] / 2**20:.0f} MiB streaming"
        )
    if "two_process" in r:
        t = r["two_process"]
        for p in ("sync", "semisync"):
            e = t[p]
            sps = ", ".join(f"{x:,.0f}" for x in e["samples_per_second_by_epoch"])
            share = ", ".join(
                f"{k} {v:.1%} (exposed {e['exposed_lookup_ratio_by_phase'][k]:.1%})"
                for k, v in e["lookup_ratio_by_phase"].items()
            )
            print(f"2 processes {p:8}: samples/s by epoch (F,J,J) {sps}; lookup {share}")
        print(f"2 processes: semisync/sync (joint epochs) {t['semisync_over_sync_joint']:.3f}")
    if "baseline" in r:
        from benchmarks.baseline import print_report

        print_report(r["baseline"])
    print(
        f"RSS ratio large/small: peak {r['rss']['peak_ratio_large_over_small']:.3f}, "
        f"streaming part {r['rss']['streaming_ratio_large_over_small']:.3f}"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
