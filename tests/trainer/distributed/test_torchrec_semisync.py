"""torchrec's own TrainPipelineSemiSync (the CUDA path) against our CPU semi-sync pipeline.

torchrec's pipeline cannot run on CPU as shipped (it records CUDA-style streams on CPU tensors).
With the stream calls taken out (lookup start and MLP forward without streams, a
pipelined forward that skips stream calls) it runs on CPU, which lets us check two things the GPU
path relies on: torchrec's fx rewrite finds and pipelines our sharded EBC inside TrainTask, and
its semi-sync semantics equal CpuPipeline's bit for bit (frozen and joint epochs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from ranking.trainer.distributed import setup as distributed
from ranking.trainer.distributed.pipelines import (
    CpuPipeline,
    run_torchrec_epoch,
    semisync_kwargs,
    timed_semisync_class,
)
from ranking.trainer.distributed.timing import SectionClock
from ranking.trainer.loop import build_sharded
from ranking.trainer.schedule import FROZEN, JOINT
from tests.trainer.distributed.test_pipelines import batches, snapshot


@pytest.fixture(scope="module")
def ctx() -> Iterator[distributed.DistContext]:
    c = distributed.init_distributed(prefer_cuda=False)
    yield c
    distributed.shutdown(c)


def cpu_semisync_class(clock: SectionClock, frozen: bool) -> type:
    """The trainer's timed TrainPipelineSemiSync with the stream calls taken out."""
    from torchrec.distributed.train_pipeline.runtime_forwards import EmbeddingPipelinedForward
    from torchrec.distributed.train_pipeline.train_pipelines import TrainPipelineSemiSync
    from torchrec.distributed.train_pipeline.utils import _start_embedding_lookup
    from torchrec.distributed.types import LazyNoWait

    class StreamlessEmbeddingForward(EmbeddingPipelinedForward):
        def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
            self._context.module_contexts.pop(self._name)
            embeddings = self._context.embedding_a2a_requests.pop(self._name).wait()
            # EmbeddingPipelinedForward.detach_embeddings without record_stream
            tensor = embeddings.values()
            detached = tensor.detach().requires_grad_()
            detached.retain_grad()
            embeddings._values = detached
            self._context.embedding_tensors.append([tensor])
            self._context.embedding_features.append([list(embeddings.keys())])
            self._context.detached_embedding_tensors.append([detached])
            return LazyNoWait(embeddings)

    class Streamless(TrainPipelineSemiSync):  # type: ignore[misc,valid-type]
        _pipelined_forward_type = StreamlessEmbeddingForward

        def start_embedding_lookup(self, batch: Any, context: Any) -> None:
            if batch is None:
                return
            for module in self._pipelined_modules:
                _start_embedding_lookup(
                    module,
                    context,
                    source_stream=None,
                    target_stream=None,
                    stream_context=self._stream_context,
                )

        def _mlp_forward(self, batch: Any, context: Any) -> Any:
            return self._model_fwd(batch)

    class StreamlessTimed(timed_semisync_class(clock, frozen), Streamless):  # type: ignore[misc]
        pass

    return StreamlessTimed


def run_torchrec(stack: Any, epoch_batches: Iterator[Any], clock: SectionClock, frozen: bool) -> int:
    pipeline = cpu_semisync_class(clock, frozen)(
        model=stack.dmp, optimizer=stack.optimizer, device=torch.device("cpu"), **semisync_kwargs()
    )
    losses: list[torch.Tensor] = []
    run_torchrec_epoch(pipeline, epoch_batches, lambda loss, rows: losses.append(loss))
    # torchrec's fx rewrite found the sharded EBC inside TrainTask and pipelined it
    assert [type(m).__name__ for m in pipeline._pipelined_modules] == ["ShardedEmbeddingBagCollection"]
    return len(losses)


@pytest.mark.parametrize("phase", [FROZEN, JOINT])
def test_torchrec_semisync_equals_cpu_semisync(ctx, manifest, model_config, phase: str) -> None:  # type: ignore[no-untyped-def]
    ours = build_sharded(model_config, seed=2, ctx=ctx)
    ours.task.model.embeddings_frozen = phase == FROZEN
    CpuPipeline(ours.dmp, ours.optimizer, SectionClock(), semisync=True).run_epoch(
        batches(manifest, model_config), phase == FROZEN, lambda loss, rows: None
    )
    theirs = build_sharded(model_config, seed=2, ctx=ctx)
    theirs.task.model.embeddings_frozen = phase == FROZEN
    clock = SectionClock()
    original = theirs.task.model.sparse_arch.forward
    steps = run_torchrec(theirs, batches(manifest, model_config), clock, phase == FROZEN)
    assert steps == sum(1 for _ in batches(manifest, model_config))
    assert theirs.task.model.sparse_arch.forward == original  # un-rewritten after the epoch
    totals = clock.resolve()
    assert totals["lookup_issue"] > 0 and totals["lookup_wait"] > 0  # the trainer's timers ran
    assert ("lookup_backward" in totals) == (phase == JOINT)  # a frozen epoch skips the table backward
    got, want = snapshot(theirs), snapshot(ours)
    for part in ("tables", "table_opt", "dense"):
        for key in want[part]:
            torch.testing.assert_close(got[part][key], want[part][key], rtol=0, atol=0, msg=f"{part} {key}")
    assert distributed.sharding_summary(theirs.dmp)
