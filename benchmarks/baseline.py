"""Plain-PyTorch baseline for the trainer: ``python -m benchmarks.baseline [--nproc 1,2]``.

The same model (``RankerModel``'s dense tower, cross net and head, the same initial weights) with
its tables as ``nn.EmbeddingBag(sparse=True)`` updated by ``torch.optim.Adagrad`` (sparse
gradients; with several processes the tables are replicated, their sparse gradients all-reduced
and the dense part wrapped in DDP) against the torchrec trainer (DistributedModelParallel, fused
fbgemm tables, ``CpuPipeline`` sync), on the same batches, interleaved round by round. Both split a
step the same way and are timed by the same ``SectionClock`` (lookup = the embedding forward and
backward including the table update; the plain run's all-reduce of the table gradients is part
of its backward), so the lookup figures compare like with like.

Reported per process count: samples/s and lookup seconds per step of joint and frozen epochs
(medians over rounds), torchrec ÷ plain ratios (medians of per-round ratios), and the peak memory
of one joint epoch in a fresh process (RSS on CPU, ``max_memory_allocated`` on CUDA).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from benchmarks.common import write_synthetic_window
from benchmarks.workers import run_workers
from ranking.trainer.distributed.timing import SectionClock
from ranking.trainer.models.model import RankerModel, TrainBatch


class PlainTables(nn.Module):
    """One ``nn.EmbeddingBag`` per feature, initialised from a RankerModel's tables."""

    def __init__(self, model: RankerModel, device: torch.device) -> None:
        super().__init__()
        cfg = model.config
        self.bags = nn.ModuleList()
        for t in cfg.tables:
            bag = nn.EmbeddingBag(t.num_embeddings, t.embedding_dim, mode="sum", sparse=True, device=device)
            with torch.no_grad():
                bag.weight.copy_(model.sparse_arch.embedding_bags[t.name].weight)
            self.bags.append(bag)

    def forward(self, sparse_features: Any) -> torch.Tensor:
        # one id per row per feature, features in config order: values are [features, rows]
        ids = sparse_features.values().view(len(self.bags), -1)
        return torch.cat([bag(ids[i].unsqueeze(1)) for i, bag in enumerate(self.bags)], dim=1)


class PlainDense(nn.Module):
    """The dense part of RankerModel over looked-up embeddings, with TrainTask's loss."""

    # RankerModel's own interaction (same layers, same math), borrowed as this module's method
    interact: ClassVar[Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor]] = RankerModel.interact

    def __init__(self, model: RankerModel, world_size: int) -> None:
        super().__init__()
        self.dense_arch, self.cross, self.over_arch, self.head = (
            model.dense_arch,
            model.cross,
            model.over_arch,
            model.head,
        )
        self.embeddings_frozen = False
        self.world_size = world_size

    def forward(self, batch: TrainBatch, pooled: torch.Tensor) -> torch.Tensor:
        logits = self.interact(batch.dense_features, pooled)
        per_row = nn.functional.binary_cross_entropy_with_logits(logits, batch.labels, reduction="none")
        return (per_row * batch.weights).sum() * self.world_size


class PlainTrainer:
    def __init__(self, cfg: Any, seed: int, device: torch.device, world_size: int) -> None:
        from ranking.trainer.models.model import build_dense_optimizer

        torch.manual_seed(seed)
        model = RankerModel(cfg, device=torch.device("cpu"))
        self.tables = PlainTables(model, device)
        self.dense = PlainDense(model, world_size).to(device)
        self.world_size = world_size
        self.module: nn.Module = self.dense
        if world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.module = DistributedDataParallel(
                self.dense, device_ids=[device.index] if device.type == "cuda" else None
            )
        self.optimizer = build_dense_optimizer(list(self.dense.parameters()), cfg.dense_optimizer)
        opt = cfg.table_optimizer
        self.table_optimizer = torch.optim.Adagrad(self.tables.parameters(), lr=opt.lr, eps=opt.eps)

    def run_epoch(self, batches: list[TrainBatch], frozen: bool, clock: SectionClock) -> None:
        import torch.distributed as dist

        self.dense.embeddings_frozen = frozen
        for batch in batches:
            with clock.section("lookup_forward"):
                if frozen:
                    with torch.no_grad():
                        pooled = self.tables(batch.sparse_features)
                else:
                    pooled = self.tables(batch.sparse_features)
            leaf = pooled.detach().requires_grad_(not frozen)
            loss = self.module(batch, leaf)
            loss.backward()
            if not frozen:
                with clock.section("lookup_backward"):
                    pooled.backward(leaf.grad)
                    if self.world_size > 1:
                        for p in self.tables.parameters():
                            assert p.grad is not None  # the backward above gave every table one
                            grad = p.grad.coalesce()
                            dist.all_reduce(grad)
                            p.grad = grad / self.world_size
                    self.table_optimizer.step()
                    self.table_optimizer.zero_grad(set_to_none=True)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)


def _batches(
    manifest_path: Path, cfg: Any, batch_size: int, rank: int, world: int, device: torch.device
) -> list[TrainBatch]:
    from features.window import read_window_manifest
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches

    manifest = read_window_manifest(manifest_path)
    plan = plan_epoch(list_units([p.path for p in manifest.train]), world, batch_size, seed=0, epoch=1)
    return [b.to(device) for b in train_batches(plan, rank, cfg, 100_000, seed=0, epoch=1)]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class _Torchrec:
    def __init__(self, cfg: Any, ctx: Any) -> None:
        from ranking.trainer.loop import build_sharded

        self.stack = build_sharded(cfg, seed=0, ctx=ctx)

    def run_epoch(self, batches: list[TrainBatch], frozen: bool, clock: SectionClock) -> None:
        from ranking.trainer.distributed.pipelines import CpuPipeline

        self.stack.task.model.embeddings_frozen = frozen
        CpuPipeline(self.stack.dmp, self.stack.optimizer, clock, semisync=False).run_epoch(
            iter(batches), frozen, lambda loss, rows: None
        )


def _epoch(
    trainer: Any, batches: list[TrainBatch], frozen: bool, device: torch.device, rows: int
) -> dict[str, float]:
    clock = SectionClock(cuda=device.type == "cuda")
    _sync(device)
    start = time.perf_counter()
    trainer.run_epoch(batches, frozen, clock)
    _sync(device)
    seconds = time.perf_counter() - start
    share = clock.share(seconds)
    local = torch.tensor([seconds, share.lookup_seconds], dtype=torch.float64)
    import torch.distributed as dist

    if dist.get_world_size() > 1:  # the slowest rank sets the pace
        dist.all_reduce(local, op=dist.ReduceOp.MAX)
    return {
        "samples_per_second": rows / float(local[0]),
        "lookup_ms_per_step": float(local[1]) / len(batches) * 1e3,
        "lookup_ratio": float(local[1]) / float(local[0]),
    }


def worker(args: argparse.Namespace) -> int:
    """One rank of the comparison (under torchrun, or alone as a gloo group of one)."""
    import logging
    import warnings

    import torch.distributed as dist

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.models.config import default_model_config

    ctx = distributed.init_distributed(prefer_cuda=args.device == "cuda")
    device = ctx.device
    cfg = default_model_config(embedding_dim=args.embedding_dim)
    batches = _batches(args.manifest, cfg, args.batch_size, ctx.rank, ctx.world_size, device)
    local_rows = torch.tensor([sum(len(b) for b in batches)])
    if ctx.world_size > 1:
        dist.all_reduce(local_rows)
    rows = int(local_rows[0])
    trainers = {"torchrec": _Torchrec(cfg, ctx), "plain": PlainTrainer(cfg, 0, device, ctx.world_size)}
    for trainer in trainers.values():  # warm-up
        _epoch(trainer, batches, False, device, rows)
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeats):  # interleaved: load drift hits every configuration alike
        for phase in ("joint", "frozen"):
            for name, trainer in trainers.items():
                runs.setdefault(f"{name}/{phase}", []).append(
                    _epoch(trainer, batches, phase == "frozen", device, rows)
                )
    if ctx.is_main:
        out: dict[str, Any] = {
            "world_size": ctx.world_size,
            "device": device.type,
            "epochs": {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in runs.items()},
        }

        def paired(a: str, b: str, metric: str) -> float:
            return statistics.median(x[metric] / y[metric] for x, y in zip(runs[a], runs[b], strict=True))

        out["ratios"] = {
            f"torchrec_over_plain_{metric}_{phase}": paired(f"torchrec/{phase}", f"plain/{phase}", metric)
            for phase in ("joint", "frozen")
            for metric in ("samples_per_second", "lookup_ms_per_step")
        }
        out["ratios"]["frozen_over_joint_torchrec"] = paired(
            "torchrec/frozen", "torchrec/joint", "samples_per_second"
        )
        out["ratios"]["frozen_over_joint_plain"] = paired("plain/frozen", "plain/joint", "samples_per_second")
        args.json_out.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    distributed.shutdown(ctx)
    return 0


_MEMORY_CHILD = r"""
import json, sys, os
from pathlib import Path
import torch
from benchmarks import baseline
from ranking.trainer.distributed import setup as distributed
from ranking.trainer.models.config import default_model_config

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

name, manifest, dim, batch_size, device = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ctx = distributed.init_distributed(prefer_cuda=device == "cuda")
cfg = default_model_config(embedding_dim=dim)
batches = baseline._batches(manifest, cfg, batch_size, 0, 1, ctx.device)
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
if ctx.device.type == "cuda":
    torch.cuda.reset_peak_memory_stats()
trainer = baseline._Torchrec(cfg, ctx) if name == "torchrec" else baseline.PlainTrainer(cfg, 0, ctx.device, 1)
baseline._epoch(trainer, batches, False, ctx.device, sum(len(b) for b in batches))
peak = (torch.cuda.max_memory_allocated() if ctx.device.type == "cuda" else status("VmHWM") - base)
print(json.dumps({"peak_bytes": peak, "kind": "cuda max_memory_allocated" if ctx.device.type == "cuda" else "RSS above the post-import baseline"}))
"""


def memory(manifest: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("torchrec", "plain"):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _MEMORY_CHILD,
                name,
                str(manifest),
                str(args.embedding_dim),
                str(args.batch_size),
                args.device,
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        )
        out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["torchrec_over_plain_peak"] = out["torchrec"]["peak_bytes"] / max(1, out["plain"]["peak_bytes"])
    return out


def compare(manifest: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The comparison for each process count in ``args.nproc`` (fresh torchrun workers), plus memory."""
    report: dict[str, Any] = {}
    for nproc in args.nproc:
        report[f"nproc_{nproc}"] = run_workers(
            "benchmarks.baseline", nproc, manifest, _shared_flags(args), "baseline"
        )
    report["memory"] = memory(manifest, args)
    return report


def _shared_flags(args: argparse.Namespace) -> list[str]:
    return [
        "--rows",
        str(args.rows),
        "--batch-size",
        str(args.batch_size),
        "--embedding-dim",
        str(args.embedding_dim),
        "--repeats",
        str(args.repeats),
        "--device",
        args.device,
    ]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.baseline")
    p.add_argument("--rows", type=int, default=60_000)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--embedding-dim", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--nproc", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--manifest", type=Path, default=None, help=argparse.SUPPRESS)
    return p


def print_report(r: dict[str, Any]) -> None:
    for key, run in r.items():
        if not key.startswith("nproc_"):
            continue
        print(f"baseline {run['world_size']} process(es), {run['device']}:")
        for name, e in run["epochs"].items():
            print(
                f"  {name:16} {e['samples_per_second']:>10,.0f} samples/s  lookup {e['lookup_ms_per_step']:.3f} ms/step"
                f" ({e['lookup_ratio']:.1%})"
            )
        for name, v in run["ratios"].items():
            print(f"  ratio {name:44} {v:.3f}")
    m = r["memory"]
    print(
        f"baseline peak memory (one joint epoch, {m['torchrec']['kind']}): torchrec {m['torchrec']['peak_bytes'] / 2**20:.0f} MiB, "
        f"plain {m['plain']['peak_bytes'] / 2**20:.0f} MiB (ratio {m['torchrec_over_plain_peak']:.2f})"
    )


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        manifest = write_synthetic_window(Path(tmp), args.rows, 4)
        report = compare(manifest, args)
    print_report(report)
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
