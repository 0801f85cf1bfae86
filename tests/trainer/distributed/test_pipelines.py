"""Schedules and pipelines on a real DistributedModelParallel (fused fbgemm tables, gloo group).

- frozen epoch: every table and its fused-optimizer state byte-identical, dense layers changed
- joint epoch: tables, their optimizer state and dense layers all changed
- frozen epoch: semisync == sync exactly
- joint epoch: semisync == a plain reference loop that reads one-step-stale embeddings
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from ranking.trainer.checkpointing.state import local_unsharded
from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
from ranking.trainer.distributed import setup as distributed
from ranking.trainer.distributed.pipelines import CpuPipeline, EmbeddingInjector, detached
from ranking.trainer.distributed.timing import LOOKUP_SECTIONS, STEP_SECTIONS, SectionClock
from ranking.trainer.loop import ShardedStack, build_sharded
from ranking.trainer.models.model import TrainBatch
from ranking.trainer.schedule import FROZEN, JOINT

BATCH = 128


@pytest.fixture(scope="module")
def ctx() -> Iterator[distributed.DistContext]:
    c = distributed.init_distributed(prefer_cuda=False)
    yield c
    distributed.shutdown(c)


def batches(manifest, cfg, epoch: int = 1) -> Iterator[TrainBatch]:  # type: ignore[no-untyped-def]
    plan = plan_epoch(list_units([p.path for p in manifest.train]), 1, BATCH, seed=0, epoch=epoch)
    return train_batches(plan, 0, cfg, 1000, seed=0, epoch=epoch)


def tables(stack: ShardedStack) -> dict[str, torch.Tensor]:
    state = {k: v for k, v in stack.dmp.state_dict().items() if "sparse_arch" in k}
    return local_unsharded(state)


def table_optimizer(stack: ShardedStack) -> dict[str, torch.Tensor]:
    return local_unsharded(distributed.table_optimizer_state(stack.dmp))


def dense(stack: ShardedStack) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in stack.task.named_parameters() if "sparse_arch" not in k}


def snapshot(stack: ShardedStack) -> dict[str, dict[str, torch.Tensor]]:
    return {"tables": tables(stack), "table_opt": table_optimizer(stack), "dense": dense(stack)}


def run_epoch(stack: ShardedStack, manifest, cfg, phase: str, pipeline: str, epoch: int = 1) -> None:  # type: ignore[no-untyped-def]
    stack.task.model.embeddings_frozen = phase == FROZEN
    CpuPipeline(stack.dmp, stack.optimizer, SectionClock(), semisync=pipeline == "semisync").run_epoch(
        batches(manifest, cfg, epoch), phase == FROZEN, lambda loss, rows: None
    )


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def all_changed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(not torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("pipeline", ["sync", "semisync"])
def test_frozen_epoch_keeps_tables_and_their_optimizer_state_byte_identical(
    ctx, manifest, model_config, pipeline: str
) -> None:  # type: ignore[no-untyped-def]
    stack = build_sharded(model_config, seed=3, ctx=ctx)
    before = snapshot(stack)
    run_epoch(stack, manifest, model_config, FROZEN, pipeline)
    after = snapshot(stack)
    assert same(before["tables"], after["tables"])
    assert same(before["table_opt"], after["table_opt"])
    assert all_changed(before["dense"], after["dense"])  # dense layers train in every phase
    # and a joint epoch afterwards changes all three
    run_epoch(stack, manifest, model_config, JOINT, pipeline, epoch=2)
    joint = snapshot(stack)
    assert all_changed(after["tables"], joint["tables"])
    assert all_changed(after["table_opt"], joint["table_opt"])
    assert all_changed(after["dense"], joint["dense"])


def test_frozen_forward_of_the_plain_model_sends_no_gradient_to_tables(model_config) -> None:  # type: ignore[no-untyped-def]
    """The detach lives in the model (what torchrec's own pipelines run on GPU)."""
    from ranking.trainer.models.model import RankerModel, TrainTask

    torch.manual_seed(0)
    task = TrainTask(RankerModel(model_config))
    batch = next(iter(batches_plain(model_config)))
    for frozen in (True, False):
        task.zero_grad(set_to_none=True)
        task.model.embeddings_frozen = frozen
        loss, _ = task(batch)
        loss.backward()
        grads = [p.grad for p in task.model.sparse_arch.parameters()]
        assert all(g is None for g in grads) == frozen
        assert all(p.grad is not None for n, p in task.named_parameters() if "sparse_arch" not in n)


def batches_plain(cfg) -> list[TrainBatch]:  # type: ignore[no-untyped-def]
    import numpy as np

    from ranking.trainer.datasets.window import Chunk, to_train_batch

    rng = np.random.default_rng(0)
    n = 32
    chunk = Chunk(
        rng.integers(0, 16, (n, len(cfg.tables))),
        rng.normal(size=(n, len(cfg.dense_features))).astype(np.float32),
        (rng.random(n) < 0.3).astype(np.float32),
    )
    return [to_train_batch(chunk, cfg, 1.0 / n)]


def test_frozen_epoch_semisync_equals_sync_exactly(ctx, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    results = {}
    for pipeline in ("sync", "semisync"):
        stack = build_sharded(model_config, seed=5, ctx=ctx)
        run_epoch(stack, manifest, model_config, FROZEN, pipeline)
        results[pipeline] = snapshot(stack)
    for part in ("tables", "table_opt", "dense"):
        assert same(results["sync"][part], results["semisync"][part]), part


def reference_stale_epoch(stack: ShardedStack, epoch_batches: Iterator[TrainBatch]) -> None:
    """Plain loop, no pipelining: batch i looks up the tables as they were *before* batch i-1's
    update (restore that snapshot for the lookup, then put the current rows back), and its
    gradient updates the current rows through the fused optimizer."""
    views = [
        shard.tensor
        for key, value in stack.dmp.state_dict().items()
        if "sparse_arch" in key
        for shard in value.local_shards()
    ]
    previous: list[torch.Tensor] | None = None
    with EmbeddingInjector(stack.task.model.sparse_arch) as injector:
        for batch in epoch_batches:
            current = [v.detach().clone() for v in views]
            if previous is not None:
                for view, old in zip(views, previous, strict=True):
                    view.data.copy_(old)  # .data: not an autograd-visible write
            pooled = injector.lookup(batch.sparse_features).wait()
            for view, now in zip(views, current, strict=True):
                view.data.copy_(now)
            leaf = detached(pooled, requires_grad=True)
            injector.provide(leaf)
            loss, _ = stack.dmp(batch)
            loss.backward()
            torch.autograd.backward(pooled.values(), leaf.values().grad)
            stack.optimizer.step()
            stack.optimizer.zero_grad(set_to_none=True)
            previous = current


def test_joint_epoch_semisync_matches_one_step_stale_reference(ctx, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    semisync = build_sharded(model_config, seed=9, ctx=ctx)
    run_epoch(semisync, manifest, model_config, JOINT, "semisync")
    reference = build_sharded(model_config, seed=9, ctx=ctx)
    reference.task.model.embeddings_frozen = False
    reference_stale_epoch(reference, batches(manifest, model_config))
    sync = build_sharded(model_config, seed=9, ctx=ctx)
    run_epoch(sync, manifest, model_config, JOINT, "sync")
    got, want, fresh = snapshot(semisync), snapshot(reference), snapshot(sync)
    for part in ("tables", "table_opt", "dense"):
        for key in want[part]:
            torch.testing.assert_close(got[part][key], want[part][key], rtol=0, atol=0, msg=f"{part} {key}")
    # the staleness is real: the synchronous run ends elsewhere
    assert not same(got["tables"], fresh["tables"])


def test_lookup_sections_are_timed_per_phase(ctx, manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    stack = build_sharded(model_config, seed=1, ctx=ctx)
    for phase in (FROZEN, JOINT):
        clock = SectionClock()
        stack.task.model.embeddings_frozen = phase == FROZEN
        CpuPipeline(stack.dmp, stack.optimizer, clock, semisync=True).run_epoch(
            batches(manifest, model_config), phase == FROZEN, lambda loss, rows: None
        )
        totals = clock.resolve()
        assert totals["lookup_issue"] > 0 and totals["lookup_wait"] >= 0
        assert ("lookup_backward" in totals) == (phase == JOINT)  # no table backward while frozen
        lookup = sum(totals.get(k, 0.0) for k in LOOKUP_SECTIONS)
        assert all(totals[k] > 0 for k in STEP_SECTIONS)  # the rest of the step, timed apart
        share = clock.share(step_seconds=sum(totals.values()))
        assert share.lookup_seconds == pytest.approx(lookup)  # sections never overlap here
        # one process: no collective runs, every lookup section is on the training thread
        assert share.exposed_seconds == pytest.approx(share.lookup_seconds, rel=1e-12)


DELAY = 0.01  # seconds until the injected collective completes
DELAYED_STEPS = 6


class _Waiting:
    """A lookup's result that also waits for a collective issued with it (like torchrec's
    output all-to-all with 2 ranks: issued by the lookup, waited for when the result is read)."""

    def __init__(self, result, work) -> None:  # type: ignore[no-untyped-def]
        self.result, self.work = result, work

    def wait(self):  # type: ignore[no-untyped-def]
        self.work.wait()
        return self.result.wait()


def inject_async_delay(stack: ShardedStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lookup issues ``torch.distributed.all_to_all_single(async_op=True)`` as the output
    dist does with 2 ranks; that collective completes on a background thread DELAY later."""
    import threading

    import torch.distributed as dist
    from torch._C._distributed_c10d import _create_work_from_future

    real = dist.all_to_all_single

    def delayed(output, input, *args, async_op=False, **kwargs):  # type: ignore[no-untyped-def]
        real(output, input, *args, **kwargs)
        future: torch.futures.Future = torch.futures.Future()
        threading.Timer(DELAY, future.set_result, args=([output],)).start()
        return _create_work_from_future(future)

    monkeypatch.setattr(dist, "all_to_all_single", delayed)
    sparse_arch = stack.task.model.sparse_arch
    lookup = sparse_arch.forward

    def lookup_with_collective(features):  # type: ignore[no-untyped-def]
        result = lookup(features)
        # looked up at call time, as torchrec does: the clock's tracking wrapper sees it
        work = dist.all_to_all_single(torch.empty(4), torch.ones(4), async_op=True)
        return _Waiting(result, work)

    sparse_arch.forward = lookup_with_collective  # what EmbeddingInjector takes as the lookup


@pytest.mark.parametrize("pipeline", ["semisync", "sync"])
def test_exposed_lookup_is_measured_not_derived(ctx, manifest, model_config, monkeypatch, pipeline) -> None:  # type: ignore[no-untyped-def]
    """An asynchronous delay in the lookup: semi-sync waits for it a step later, after the dense
    backward ran, so part of it is hidden (exposed < lookup); sync waits right away (exposed ==
    lookup). Fails if exposed is computed from lookup, or if lookup misses the asynchronous part."""
    import itertools

    stack = build_sharded(model_config, seed=1, ctx=ctx)
    inject_async_delay(stack, monkeypatch)
    clock = SectionClock()
    CpuPipeline(stack.dmp, stack.optimizer, clock, semisync=pipeline == "semisync").run_epoch(
        itertools.islice(batches(manifest, model_config), DELAYED_STEPS), False, lambda loss, rows: None
    )
    share = clock.share(step_seconds=1.0)
    totals = clock.resolve()
    # every delayed collective is in the lookup, from its issue to its completion
    assert totals["lookup_async"] >= DELAYED_STEPS * DELAY
    assert share.lookup_seconds >= DELAYED_STEPS * DELAY
    if pipeline == "semisync":
        assert share.exposed_seconds < share.lookup_seconds
        # what is exposed is what the training thread spent in its lookup sections
        assert share.exposed_seconds == pytest.approx(sum(totals.get(k, 0.0) for k in LOOKUP_SECTIONS))
    else:
        assert share.exposed_seconds == pytest.approx(share.lookup_seconds, rel=1e-9)
        assert totals["lookup_forward"] >= DELAYED_STEPS * DELAY  # the wait is on the training thread


@pytest.mark.parametrize("semisync", [False, True])
def test_a_frozen_epoch_builds_no_autograd_graph_for_the_lookup(
    ctx, manifest, model_config, semisync: bool
) -> None:  # type: ignore[no-untyped-def]
    """Frozen: the pooled embeddings come out of the lookup without a graph (no_grad), and the
    tensors the dense forward reads do not require grad; joint: both carry a graph."""
    stack = build_sharded(model_config, seed=3, ctx=ctx)
    pipeline = CpuPipeline(stack.dmp, stack.optimizer, SectionClock(), semisync=semisync)
    pooled_seen: list[torch.Tensor] = []
    leaves_seen: list[torch.Tensor] = []
    forward = pipeline._forward

    def recording_forward(injector, batch, pooled, frozen):  # type: ignore[no-untyped-def]
        out = forward(injector, batch, pooled, frozen)
        pooled_seen.append(pooled.values())  # what the lookup returned (after its wait)
        leaves_seen.append(out[2].values())  # what the dense forward read
        return out

    pipeline._forward = recording_forward  # type: ignore[method-assign]
    for phase, epoch in ((FROZEN, 1), (JOINT, 2)):
        pooled_seen.clear()
        leaves_seen.clear()
        stack.task.model.embeddings_frozen = phase == FROZEN
        pipeline.run_epoch(batches(manifest, model_config, epoch), phase == FROZEN, lambda loss, rows: None)
        assert pooled_seen and leaves_seen
        graph = [v.grad_fn is not None for v in pooled_seen]
        needs_grad = [v.requires_grad for v in leaves_seen]
        assert all(graph) == (phase == JOINT) and any(graph) == (phase == JOINT), phase
        assert all(needs_grad) == (phase == JOINT) and any(needs_grad) == (phase == JOINT), phase
