"""Profile of the CPU embedding-lookup path: ``python -m benchmarks.lookup_profile [--nproc 1|2|1,2]
[--json-out F]``.

The model and window of ``benchmarks.train`` (``benchmarks.common``: ``synthetic_window``, ``timed_epoch``), per-rank batches as
the baseline's workers build them (``benchmarks.baseline._batches``), the stack of
``ranking.trainer.loop.build_sharded``. After a few warm-up steps, ``torch.profiler``
(CPU activity, no shapes, no stacks) records, on rank 0:

- ``kjt_build``: building the batches (``ranking.trainer.datasets.window.to_train_batch``, where the
  KeyedJaggedTensor is made) from the same ids;
- ``lookup_frozen`` / ``lookup_joint``: the sharded EBC's forward on a batch's KJT and its
  ``wait()`` (``EmbeddingInjector.lookup``, what ``CpuPipeline`` calls), without / with autograd;
- ``plain_frozen``: the same lookup on plain ``nn.EmbeddingBag`` tables (``benchmarks.baseline``);
- ``step_joint`` / ``step_frozen``: whole ``CpuPipeline`` sync steps (``benchmarks.train._run``).

Each lookup is split into stages by the profiler's ranges: torchrec's own annotations (its
``[lookup]``, ``[output_dist]`` ranges and awaitable ``wait()`` ranges) and two ranges this script
puts around the sharded module's ``input_dist`` and ``compute_and_output_dist`` (instance
attributes, removed afterwards). Every event is charged to the innermost stage range around it:

- ``input_dist``: ``input_dist`` (feature permute/split, the all-to-all of lengths and ids; with
  one process the local split and permute index generation) and the two ``KJTList*`` waits;
- ``kernel``: torchrec's ``[lookup]`` range (fbgemm's TBE: its Python wrapper, input casts,
  bounds check, the ``fbgemm::`` forward kernel);
- ``output_dist``: torchrec's ``[output_dist]`` range (the pooled all-to-all issued) and the
  ``EmbeddingBagCollectionAwaitable`` wait (its completion, the KeyedTensor built);
- ``other``: whatever ran inside the lookup outside those (the module call, torchrec's glue).

Within a stage, the self time of operators (``aten::``, ``fbgemm::``) is ``ops``, the self time
of the ranges themselves is ``python`` (interpreter and dispatcher time between operators), and
``comm`` is the collectives: c10d/gloo operators, torchrec's all-to-all autograd functions and,
with several processes, the own time of torchrec's all-to-all awaitables' ``wait()`` ranges (they
block in gloo's ``Work.wait()``, which is no profiled operator). Figures are medians over the
profiled calls (per call, the stages add up to the profiled wall time of the lookup; for a step,
from the input dist's start to the output dist's wait's end, the time between the ranges counted
as ``other`` Python). ``groups_us`` reads the same time by what ran: ``comm``, the ``kernel``
stage's fbgemm operators, every other operator, Python/dispatcher. The profiler slows everything
down (the dense layers more than the lookup); each mode is also timed without it
(``wall_us_unprofiled``: median per call; for steps the ``lookup_forward`` section's mean).

``ours`` reports what of the path is this repository's code: ``to_train_batch``, the section
timer around the lookup, and the offsets our batch's int32 lengths make fbgemm's TBE compute and
cast. With several processes on a small machine the waits include the other rank's scheduling.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.workers import run_workers

MARK = "lookup_profile::"
LOOKUP_MARK = MARK + "lookup"
KJT_MARK = MARK + "kjt_build"
PLAIN_MARK = MARK + "plain_lookup"
INPUT_DIST_MARK = MARK + "input_dist"
COMPUTE_MARK = MARK + "compute_and_output_dist"
# computing the offsets from the batch's lengths and casting them to the indices' int64 in TBE
OFFSETS_OPS = ("fbgemm::asynchronous_complete_cumsum", "aten::_to_copy")
KINDS = ("python", "comm", "fbgemm", "aten")
STAGES = ("kjt_build", "input_dist", "kernel", "output_dist", "other")
# operators of the collectives: c10d/gloo calls and torchrec's all-to-all autograd functions (their
# ``*_Wait`` ones block until the other ranks' data arrived)
COMM_WORDS = ("c10d::", "gloo", "alltoall", "all_to_all", "allreduce", "all_reduce", "aten::wait", "All2All_")


def stage_of(name: str) -> str | None:
    """The stage a profiler range opens (None: not a stage range)."""
    if name == KJT_MARK:
        return "kjt_build"
    if name.startswith("[splits_dist]") or name in (
        INPUT_DIST_MARK,
        "## KJTListSplitsAwaitable wait() ##",
        "## KJTListAwaitable wait() ##",
    ):
        return "input_dist"
    if name.startswith("[lookup]") or name == PLAIN_MARK:
        return "kernel"
    if name.startswith("[output_dist]") or name == "## EmbeddingBagCollectionAwaitable wait() ##":
        return "output_dist"
    if name in (LOOKUP_MARK, COMPUTE_MARK):
        return "other"
    return None


def kind_of(event: Any, world_size: int) -> str:
    """python (a range's own time), comm (collectives and the waits for them), fbgemm, aten."""
    name = event.name
    if world_size > 1 and is_comm_wait(name):
        return "comm"
    if event.is_user_annotation:
        return "python"
    if any(word in name for word in COMM_WORDS):
        return "comm"
    if name.startswith("fbgemm::") or "SplitLookupFunction" in name:
        return "fbgemm"
    return "aten"


def is_comm_wait(name: str) -> bool:
    """torchrec's all-to-all awaitables: their ``wait()`` ranges block in gloo's ``Work.wait()``
    (not a profiled operator), so their own time is the wait for the other ranks (with one
    process nothing is sent and it is Python)."""
    return name.startswith("## ") and "wait()" in name and ("AllToAll" in name or "PooledEmbeddings" in name)


def split_call(roots: list[Any], world_size: int) -> dict[str, dict[str, float]]:
    """One lookup (the profiler sub-trees ``roots``), µs: for each stage its self time by kind
    (python, comm, fbgemm, aten), ``ops`` = comm + fbgemm + aten, ``total`` = ops + python."""
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def walk(event: Any, stage: str) -> None:
        stage = stage_of(event.name) or stage
        acc[stage][kind_of(event, world_size)] += event.self_cpu_time_total
        for child in event.cpu_children:
            walk(child, stage)

    for root in roots:
        walk(root, stage_of(root.name) or "other")
    out: dict[str, dict[str, float]] = {}
    for stage in STAGES:
        kinds = acc.get(stage, {})
        row = {k: kinds.get(k, 0.0) for k in KINDS}
        row["ops"] = row["comm"] + row["fbgemm"] + row["aten"]
        row["total"] = row["ops"] + row["python"]
        out[stage] = row
    return out


def groups_of(split: dict[str, dict[str, float]]) -> dict[str, float]:
    """One lookup's time by what ran: the collectives, fbgemm's kernel operators (in the
    ``kernel`` stage), every other operator, and Python/dispatcher time (wall - operators)."""
    lookup = STAGES[1:]
    comm = sum(split[s]["comm"] for s in lookup)
    kernel = split["kernel"]["fbgemm"]
    return {
        "comm": comm,
        "fbgemm_kernel_ops": kernel,
        "other_ops": sum(split[s]["ops"] for s in lookup) - comm - kernel,
        "python_dispatcher": sum(split[s]["python"] for s in lookup),
    }


def medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Leaf-wise medians of equally shaped nested dicts of numbers."""
    first = rows[0]
    return {
        k: medians([r[k] for r in rows])
        if isinstance(first[k], dict)
        else statistics.median(r[k] for r in rows)
        for k in first
    }


def per_step(ranges: list[Any]) -> list[list[Any]]:
    """The outermost stage ranges of a run of steps, one list per lookup (each starts with the
    ``input_dist`` range)."""
    steps: list[list[Any]] = []
    for event in sorted(ranges, key=lambda e: e.time_range.start):
        if event.name == INPUT_DIST_MARK or not steps:
            steps.append([])
        steps[-1].append(event)
    return steps


def _total_within(roots: list[Any], range_prefix: str, names: tuple[str, ...]) -> float:
    """Total CPU time (µs) of the events named ``names`` inside ranges starting ``range_prefix``."""
    total = 0.0

    def walk(event: Any, inside: bool) -> None:
        nonlocal total
        inside = inside or event.name.startswith(range_prefix)
        if inside and event.name in names:
            total += event.cpu_time_total
            return
        for child in event.cpu_children:
            walk(child, inside)

    for root in roots:
        walk(root, False)
    return total


def outermost_stage_ranges(events: list[Any]) -> list[Any]:
    """Stage ranges with no stage range above them (the roots of the lookup's sub-trees)."""
    roots = []
    for event in events:
        if stage_of(event.name) is None:
            continue
        parent = event.cpu_parent
        while parent is not None and stage_of(parent.name) is None:
            parent = parent.cpu_parent
        if parent is None:
            roots.append(event)
    return roots


def top_ops(prof: Any, calls: int, n: int = 12) -> list[dict[str, Any]]:
    """key_averages() by self CPU time, per call (µs), operators and ranges alike."""
    rows = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)[:n]
    return [{"name": a.key, "self_us": a.self_cpu_time_total / calls, "count": a.count / calls} for a in rows]


def categories(prof: Any, calls: int, world_size: int) -> dict[str, float]:
    """Self time per call (µs) over the whole profile by kind (python = all ranges)."""
    out: dict[str, float] = defaultdict(float)
    main = _main_thread(prof)
    for event in prof.events():
        if event.thread == main:  # not gloo's own threads (their work items)
            out[kind_of(event, world_size)] += event.self_cpu_time_total / calls
    return dict(out)


def _main_thread(prof: Any) -> int:
    counts: dict[int, int] = defaultdict(int)
    for event in prof.events():
        counts[event.thread] += 1
    return max(counts, key=lambda t: counts[t])


@contextlib.contextmanager
def stage_marks(sharded_ebc: Any) -> Iterator[None]:
    """Profiler ranges around the sharded EBC's ``input_dist`` and ``compute_and_output_dist``
    (instance attributes over the class's methods; ``ShardedModule.forward`` calls both)."""
    from torch.autograd.profiler import record_function

    def marked(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with record_function(name):
                return method(*args, **kwargs)

        return call

    sharded_ebc.input_dist = marked(INPUT_DIST_MARK, sharded_ebc.input_dist)
    sharded_ebc.compute_and_output_dist = marked(COMPUTE_MARK, sharded_ebc.compute_and_output_dist)
    try:
        yield
    finally:
        del sharded_ebc.input_dist, sharded_ebc.compute_and_output_dist


def _profiler() -> Any:
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU], record_shapes=False, with_stack=False)


def _timed(call: Callable[[Any], Any], items: list[Any], rounds: int) -> float:
    """Median µs of one ``call(item)``, over every item and round, without the profiler."""
    times = []
    for _ in range(rounds):
        for item in items:
            start = time.perf_counter()
            call(item)
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def profile_calls(
    name: str, mark: str, call: Callable[[Any], Any], items: list[Any], rounds: int, world_size: int
) -> dict[str, Any]:
    """Profile ``call(item)`` for every item, each inside the range ``mark``; medians over calls."""
    from torch.autograd.profiler import record_function

    unprofiled = _timed(call, items, rounds)
    with _profiler() as prof:
        for item in items:
            with record_function(mark):
                call(item)
    roots = [e for e in prof.events() if e.name == mark]
    splits = [split_call([root], world_size) for root in roots]
    return {
        "mode": name,
        "calls": len(items),
        "wall_us_unprofiled": unprofiled,
        "wall_us_profiled": statistics.median(r.cpu_time_total for r in roots),
        "stages": medians(splits),
        "groups_us": medians([groups_of(split) for split in splits]),
        "top": top_ops(prof, len(items)),
        "offsets_cumsum_and_cast_us": statistics.median(
            _total_within([root], "[lookup]", OFFSETS_OPS) for root in roots
        ),
    }


def profile_steps(stack: Any, batches: list[Any], phase: str, rounds: int, world_size: int) -> dict[str, Any]:
    """``benchmarks.train._run`` over the batches (sync), unprofiled (medians over rounds) and
    profiled; the lookup forward section split into stages by the same ranges."""
    from benchmarks.common import median_of, timed_epoch

    steps = len(batches)
    unprofiled = median_of([timed_epoch(stack, batches, phase, "sync") for _ in range(rounds)])
    with _profiler() as prof:
        profiled = timed_epoch(stack, batches, phase, "sync")
    events = list(prof.events())
    splits, spans = [], []
    for ranges in per_step(outermost_stage_ranges(events)):
        split = split_call(ranges, world_size)
        span = ranges[-1].time_range.end - ranges[0].time_range.start
        # between the stage ranges: ShardedModule.forward and the pipeline's glue, in Python
        split["other"]["python"] += span - sum(r.cpu_time_total for r in ranges)
        split["other"]["total"] = split["other"]["python"] + split["other"]["ops"]
        splits.append(split)
        spans.append(span)
    main = _main_thread(prof)
    backward: dict[str, float] = defaultdict(float)  # the embedding backward's operators (joint)
    for event in events:
        if event.thread != main or event.is_user_annotation:
            continue
        name = event.name
        if "SplitLookupFunction" in name or ("fbgemm::" in name and "backward" in name):
            backward["fbgemm"] += event.self_cpu_time_total / steps
        elif "All2All" in name and "Backward" in name:
            backward["comm"] += event.self_cpu_time_total / steps
    return {
        "mode": f"step_{phase}",
        "calls": steps,
        "sections_ms_unprofiled": unprofiled,
        "sections_ms_profiled": profiled,
        # the lookup_forward section (mean per step) and, profiled, the median span from the input
        # dist's start to the output dist's wait's end
        "wall_us_unprofiled": unprofiled["lookup_forward_ms"] * 1e3,
        "wall_us_profiled": statistics.median(spans),
        "stages": medians(splits),
        "groups_us": medians([groups_of(split) for split in splits]),
        "step_categories_us": categories(prof, steps, world_size),
        "embedding_backward_us": {
            "section_profiled": profiled.get("lookup_backward_ms", 0.0) * 1e3,
            "fbgemm": backward["fbgemm"],
            "comm": backward["comm"],
        },
        "top": top_ops(prof, steps, n=15),
    }


def ours(modes: dict[str, Any], rounds: int) -> dict[str, float]:
    """What of the lookup path is this repository's code (µs per step): building the batch
    (``to_train_batch``, unprofiled), the section timer around the sync lookup
    (``SectionClock.section`` with ``track_async`` and ``settles``, empty, unprofiled; the disabled
    clock's for scale), and the operators our batch's int32 lengths cost inside fbgemm's TBE
    (offsets computed from the lengths and cast to int64; profiled, frozen lookup)."""
    from ranking.trainer.distributed.timing import SectionClock

    def section(clock: SectionClock) -> None:
        with clock.section("lookup_forward", track_async=True, settles=True):
            pass

    on, off = SectionClock(), SectionClock(enabled=False)
    empty = list(range(2000))
    return {
        "kjt_build_us": modes["kjt_build"]["wall_us_unprofiled"],
        "clock_lookup_section_us": _timed(lambda _: section(on), empty, rounds),
        "clock_disabled_section_us": _timed(lambda _: section(off), empty, rounds),
        "offsets_cumsum_and_cast_us_profiled": modes["lookup_frozen"]["offsets_cumsum_and_cast_us"],
    }


def _chunks_of(batches: list[Any]) -> list[Any]:
    """The Chunks the batches were built from (ids [rows, features] C-contiguous, as decoded)."""
    import numpy as np

    from ranking.trainer.datasets.window import Chunk

    out = []
    for b in batches:
        kjt = b.sparse_features
        ids = kjt.values().view(len(kjt.keys()), -1).T.numpy()
        out.append(
            Chunk(ids=np.ascontiguousarray(ids), dense=b.dense_features.numpy(), labels=b.labels.numpy())
        )
    return out


def worker(args: argparse.Namespace) -> dict[str, Any] | None:
    """One rank: build, warm up, profile every mode; rank 0 returns the report."""
    import torch

    from benchmarks.baseline import PlainTables, _batches
    from benchmarks.common import timed_epoch
    from ranking.trainer.datasets.window import to_train_batch
    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.distributed.pipelines import EmbeddingInjector
    from ranking.trainer.loop import build_sharded
    from ranking.trainer.models.config import default_model_config
    from ranking.trainer.models.model import RankerModel
    from ranking.trainer.schedule import FROZEN, JOINT

    distributed.quiet_library_noise()
    ctx = distributed.init_distributed(prefer_cuda=False)
    cfg = default_model_config(embedding_dim=args.embedding_dim)
    batches = _batches(args.manifest, cfg, args.batch_size, ctx.rank, ctx.world_size, torch.device("cpu"))
    need = args.warmup + args.steps
    if len(batches) < need:
        raise SystemExit(f"{len(batches)} batches, need {need}: raise --rows")
    warm, batches = batches[: args.warmup], batches[args.warmup : need]
    stack = build_sharded(cfg, seed=0, ctx=ctx)
    sebc = stack.task.model.sparse_arch
    torch.manual_seed(0)
    plain = PlainTables(RankerModel(cfg), torch.device("cpu"))
    lookup = EmbeddingInjector(sebc).lookup
    for phase in (JOINT, FROZEN):
        timed_epoch(stack, warm, phase, "sync")
    modes: dict[str, Any] = {}
    with torch.no_grad():
        for b in warm:
            lookup(b.sparse_features).wait()
            plain(b.sparse_features)
    chunks = _chunks_of(batches)
    weight = float(batches[0].weights[0])
    modes["kjt_build"] = profile_calls(
        "kjt_build", KJT_MARK, lambda c: to_train_batch(c, cfg, weight), chunks, args.rounds, ctx.world_size
    )
    with stage_marks(sebc):
        with torch.no_grad():
            modes["lookup_frozen"] = profile_calls(
                "lookup_frozen",
                LOOKUP_MARK,
                lambda b: lookup(b.sparse_features).wait(),
                batches,
                args.rounds,
                ctx.world_size,
            )
            modes["plain_frozen"] = profile_calls(
                "plain_frozen",
                PLAIN_MARK,
                lambda b: plain(b.sparse_features),
                batches,
                args.rounds,
                ctx.world_size,
            )
        # with autograd (the graph is dropped: no backward, the tables are left as they are)
        modes["lookup_joint"] = profile_calls(
            "lookup_joint",
            LOOKUP_MARK,
            lambda b: lookup(b.sparse_features).wait(),
            batches,
            args.rounds,
            ctx.world_size,
        )
        for phase in (JOINT, FROZEN):
            modes[f"step_{phase}"] = profile_steps(stack, batches, phase, args.rounds, ctx.world_size)
    report = None
    if ctx.is_main:
        report = {
            "world_size": ctx.world_size,
            "rank": ctx.rank,
            "rows_per_rank_batch": len(batches[0]),
            "sharding": stack.sharding,
            "modes": modes,
            "split": summary(modes),
            "ours": ours(modes, args.rounds),
        }
    distributed.shutdown(ctx)
    return report


def summary(modes: dict[str, Any]) -> dict[str, Any]:
    """The lookup path per step (building the batch's KJT + the lookup), profiled µs (medians over
    calls) and shares of their sum: by stage, and by what ran (collectives, fbgemm's kernel, other
    operators, Python/dispatcher)."""
    kjt = modes["kjt_build"]["wall_us_profiled"]
    out: dict[str, Any] = {}
    for mode in ("lookup_frozen", "lookup_joint", "step_frozen", "step_joint"):
        stages = {"kjt_build": kjt, **{s: modes[mode]["stages"][s]["total"] for s in STAGES[1:]}}
        groups = {"kjt_build": kjt, **modes[mode]["groups_us"]}
        stage_sum, group_sum = sum(stages.values()), sum(groups.values())
        out[mode] = {
            "stages_us": stages,
            "stage_shares": {k: v / stage_sum for k, v in stages.items()},
            "groups_us": groups,
            "group_shares": {k: v / group_sum for k, v in groups.items()},
            "path_us": group_sum,
        }
    out["torchrec_over_plain_frozen_unprofiled"] = (
        modes["lookup_frozen"]["wall_us_unprofiled"] / modes["plain_frozen"]["wall_us_unprofiled"]
    )
    return out


def _run_nproc(nproc: int, manifest: Path, args: argparse.Namespace) -> dict[str, Any]:
    if nproc == 1:
        args.manifest = manifest
        report = worker(args)
        assert report is not None
        return report
    return run_workers("benchmarks.lookup_profile", nproc, manifest, _shared_flags(args), "lookup profile")


def _shared_flags(args: argparse.Namespace) -> list[str]:
    return [
        f"--batch-size={args.batch_size}",
        f"--embedding-dim={args.embedding_dim}",
        f"--steps={args.steps}",
        f"--warmup={args.warmup}",
        f"--rounds={args.rounds}",
    ]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.lookup_profile")
    p.add_argument(
        "--nproc", type=lambda s: [int(x) for x in s.split(",")], default=[1], help="e.g. 1, 2 or 1,2"
    )
    p.add_argument("--rows", type=int, default=40_000, help="training rows in the window (4 days)")
    p.add_argument("--batch-size", type=int, default=1024, help="global batch")
    p.add_argument("--embedding-dim", type=int, default=32)
    p.add_argument("--steps", type=int, default=30, help="profiled lookups / steps per mode")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3, help="unprofiled timing rounds per mode (median)")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--manifest", type=Path, default=None, help=argparse.SUPPRESS)
    return p


def _code_version() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # before torch loads (see benchmarks.train)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    if args.worker:
        report = worker(args)
        if report is not None and args.json_out:
            args.json_out.write_text(json.dumps(report) + "\n")
        return 0
    from benchmarks.common import synthetic_window

    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "code_version": _code_version(),
        "load_average_before": os.getloadavg()[0],
        "config": {
            "rows": args.rows,
            "batch_size": args.batch_size,
            "embedding_dim": args.embedding_dim,
            "steps": args.steps,
            "warmup": args.warmup,
            "rounds": args.rounds,
            "omp_num_threads": os.environ["OMP_NUM_THREADS"],
        },
    }
    with tempfile.TemporaryDirectory(prefix="lookup-profile-") as tmp:
        manifest = synthetic_window(Path(tmp), args.rows, days=4)
        for nproc in args.nproc:
            result[f"nproc_{nproc}"] = _run_nproc(nproc, manifest.path, args)
    result["load_average_after"] = os.getloadavg()[0]
    print_report(result)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


def print_report(r: dict[str, Any]) -> None:
    c = r["config"]
    print(
        f"lookup profile: batch {c['batch_size']}, dim {c['embedding_dim']}, {c['steps']} profiled calls per mode, "
        f"code {r['code_version']}, load {r['load_average_before']:.1f} -> {r['load_average_after']:.1f}"
    )
    for key in sorted(k for k in r if k.startswith("nproc_")):
        run = r[key]
        modes, split = run["modes"], run["split"]
        print(
            f"== {run['world_size']} process(es), rank {run['rank']}, {run['rows_per_rank_batch']} rows per batch"
        )
        for name, m in modes.items():
            print(
                f"  {name:14} wall/call {m['wall_us_unprofiled']:8.1f} us unprofiled, {m['wall_us_profiled']:8.1f} us profiled"
            )
        print(
            f"  torchrec / plain frozen lookup (unprofiled): {split['torchrec_over_plain_frozen_unprofiled']:.2f}"
        )
        header = f"  {'profiled us/step':24}" + "".join(
            f"{s:>14}" for s in ("lookup_frozen", "lookup_joint", "step_frozen", "step_joint")
        )
        print(header)
        modes_order = ("lookup_frozen", "lookup_joint", "step_frozen", "step_joint")
        for stage in STAGES:
            cells = "".join(
                f"{split[m]['stages_us'][stage]:7.0f} {split[m]['stage_shares'][stage]:5.1%}"
                for m in modes_order
            )
            print(f"  {stage:24}{cells}")
        for group in ("comm", "fbgemm_kernel_ops", "other_ops", "python_dispatcher"):
            cells = "".join(
                f"{split[m]['groups_us'][group]:7.0f} {split[m]['group_shares'][group]:5.1%}"
                for m in modes_order
            )
            print(f"  {group:24}{cells}")
        cells = "".join(f"{split[m]['path_us']:7.0f}{'':7}" for m in modes_order)
        print(f"  {'path (KJT + lookup)':24}{cells}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
