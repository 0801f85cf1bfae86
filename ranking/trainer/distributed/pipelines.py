"""Training pipelines: ``sync`` and ``semisync`` (semi-synchronous embedding prefetch).

Semantics (the same as torchrec's ``TrainPipelineSemiSync``): for batch i the dense forward runs,
then the embedding lookup of batch i+1 is issued, then batch i's backward and table update run.
Batch i+1 therefore reads the tables as they were before batch i's update (one-step-stale reads),
and its lookup (and, when sharded, its all-to-all) can overlap batch i's backward. Dense layers
stay synchronous: batch i+1's dense forward sees the dense update of batch i.

Both pipelines split the step the way torchrec's semi-sync does: the lookup runs on its own, the
model's call to the sharded EBC is served a detached copy of its output, ``loss.backward()`` yields
the dense gradients and the gradient of the embeddings, and ``autograd.backward(pooled, grad)`` is
the embedding backward (the fused fbgemm optimizer updates the rows). That split is what makes the lookup time measurable and lets a
frozen epoch skip the embedding backward (and the lookup's autograd graph) altogether.

:class:`CpuPipeline` below runs both on CPU (torchrec's pipeline fails on CPU as shipped: it
records CUDA-style streams on CPU tensors) and the sync loop on CUDA; CUDA semi-sync uses
torchrec's ``TrainPipelineSemiSync`` as shipped (:func:`torchrec_pipeline`), with CUDA-event
timers around its lookup stages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import torch

from ranking.trainer.distributed.timing import SectionClock
from ranking.trainer.models.model import TrainBatch

StepCallback = Callable[[torch.Tensor, int], None]  # (this rank's share of the batch loss, local rows)


class EmbeddingInjector:
    """While active, the model's call to the sharded EBC returns embeddings looked up earlier
    (what torchrec's pipelines do by swapping in a pipelined forward); ``lookup`` is the real one
    (input dist, fbgemm lookup, output dist)."""

    def __init__(self, sparse_arch: Any) -> None:
        self.sparse_arch = sparse_arch
        self.lookup: Callable[..., Any] = sparse_arch.forward
        self._ready: Any = None

    def __enter__(self) -> EmbeddingInjector:
        self.sparse_arch.forward = self._serve
        return self

    def __exit__(self, *exc: object) -> None:
        del self.sparse_arch.forward  # back to the class's forward

    def provide(self, pooled: Any) -> None:
        self._ready = pooled

    def _serve(self, *args: Any, **kwargs: Any) -> Any:
        pooled, self._ready = self._ready, None
        if pooled is None:
            raise RuntimeError("the model asked for embeddings that were not looked up")
        return pooled


def detached(pooled: Any, requires_grad: bool) -> Any:
    """The KeyedTensor the dense forward reads: same keys, values cut from the lookup's graph."""
    from torchrec import KeyedTensor

    values = pooled.values().detach().requires_grad_(requires_grad)
    return KeyedTensor(keys=pooled.keys(), length_per_key=pooled.length_per_key(), values=values)


class CpuPipeline:
    """The sync and semi-sync step loops over a DistributedModelParallel(TrainTask)."""

    def __init__(
        self, dmp: Any, optimizer: torch.optim.Optimizer, clock: SectionClock, semisync: bool
    ) -> None:
        from ranking.trainer.distributed.setup import unwrap

        self.dmp = dmp
        self.optimizer = optimizer
        self.clock = clock
        self.semisync = semisync
        model: Any = unwrap(dmp).model
        self.sparse_arch: Any = model.sparse_arch

    def _issue(self, lookup: Callable[..., Any], batch: TrainBatch, frozen: bool) -> Any:
        if frozen:  # no autograd graph for a lookup nobody will backpropagate into
            with torch.no_grad():
                return lookup(batch.sparse_features)
        return lookup(batch.sparse_features)

    def _forward(
        self, injector: EmbeddingInjector, batch: TrainBatch, pooled: Any, frozen: bool
    ) -> tuple[Any, Any, Any]:
        """(loss to backpropagate, this rank's share of the batch loss, the detached embeddings)"""
        with self.clock.section("dense_forward", lookup=False):
            leaf = detached(pooled, requires_grad=not frozen)
            injector.provide(leaf)
            loss, (reported, _, _) = self.dmp(batch)
        return loss, reported, leaf

    def _backward_and_update(self, loss: torch.Tensor, pooled: Any, leaf: Any, frozen: bool) -> None:
        with self.clock.section("dense_backward", lookup=False):
            loss.backward()  # dense gradients (DDP all-reduce) + the gradient of the embeddings
        if not frozen:
            with self.clock.section("lookup_backward"):
                torch.autograd.backward(pooled.values(), leaf.values().grad)
        with self.clock.section("dense_optimizer", lookup=False):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

    def run_epoch(self, batches: Iterator[TrainBatch], frozen: bool, on_step: StepCallback) -> None:
        with EmbeddingInjector(self.sparse_arch) as injector:
            if self.semisync:
                self._run_semisync(injector, batches, frozen, on_step)
            else:
                self._run_sync(injector, batches, frozen, on_step)

    def _run_sync(
        self, injector: EmbeddingInjector, batches: Iterator[TrainBatch], frozen: bool, on_step: StepCallback
    ) -> None:
        for batch in batches:
            with self.clock.section("lookup_forward", track_async=True, settles=True):
                pooled = self._issue(injector.lookup, batch, frozen).wait()
            loss, reported, leaf = self._forward(injector, batch, pooled, frozen)
            self._backward_and_update(loss, pooled, leaf, frozen)
            on_step(reported, len(batch))

    def _run_semisync(
        self, injector: EmbeddingInjector, batches: Iterator[TrainBatch], frozen: bool, on_step: StepCallback
    ) -> None:
        current = next(batches, None)
        if current is None:
            return
        with self.clock.section("lookup_issue", track_async=True):
            pending = self._issue(injector.lookup, current, frozen)
        while current is not None:
            with self.clock.section("lookup_wait", settles=True):
                pooled = pending.wait()
            upcoming = next(batches, None)
            loss, reported, leaf = self._forward(injector, current, pooled, frozen)
            if upcoming is not None:
                # issued before this batch's table update: the next batch reads one-step-stale rows
                with self.clock.section("lookup_issue", track_async=True):
                    pending = self._issue(injector.lookup, upcoming, frozen)
            self._backward_and_update(loss, pooled, leaf, frozen)
            on_step(reported, len(current))
            current = upcoming


def timed_semisync_class(clock: SectionClock, frozen: bool = False) -> type:
    """torchrec's ``TrainPipelineSemiSync`` with section timers on the streams its lookup stages
    run on (CUDA events when the clock is a CUDA clock): the input dist on its ``data_dist``
    stream (not exposed: it runs beside the training stream), the lookup start (compute + output
    dist issue) and the embedding backward on the training stream, and the training stream's wait
    for the looked-up embeddings inside the pipelined forward (the exposed part of the output
    all-to-all). ``frozen``: the lookup runs without an autograd graph and the embedding backward
    (with the fused table update) is skipped, as in :class:`CpuPipeline`."""
    from torchrec.distributed.train_pipeline.train_pipelines import TrainPipelineSemiSync

    class TimedSemiSync(TrainPipelineSemiSync):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # an instance attribute: wraps whatever forward class this pipeline (or a subclass) uses
            base: type = type(self)._pipelined_forward_type  # type: ignore[misc,has-type]
            self._pipelined_forward_type = timed_forward_class(base, clock)

        def start_sparse_data_dist(self, batch: Any, context: Any) -> None:
            with clock.section("input_dist", stream=self._data_dist_stream, track_async=True):
                super().start_sparse_data_dist(batch, context)

        def wait_sparse_data_dist(self, context: Any) -> None:
            with clock.section("input_dist", stream=self._data_dist_stream, track_async=True):
                super().wait_sparse_data_dist(context)

        def start_embedding_lookup(self, batch: Any, context: Any) -> None:
            with clock.section("lookup_issue", track_async=True), torch.set_grad_enabled(not frozen):
                super().start_embedding_lookup(batch, context)

        def embedding_backward(self, context: Any) -> None:
            if frozen:  # nothing to backpropagate into: the model detached the embeddings
                return
            with clock.section("lookup_backward"):
                super().embedding_backward(context)

    return TimedSemiSync


def timed_forward_class(base: type, clock: SectionClock) -> type:
    """A pipelined forward that times the training stream's wait for the embeddings."""

    class TimedForward(base):  # type: ignore[misc,valid-type]
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with clock.section("lookup_wait", settles=True):
                return super().__call__(*args, **kwargs)

    return TimedForward


class SemiSyncOptions(TypedDict):
    """Keyword arguments of torchrec's ``TrainPipelineSemiSync`` this trainer sets."""

    execute_all_batches: bool
    start_batch: int
    stash_gradients: bool
    strict: bool


def semisync_kwargs() -> SemiSyncOptions:
    """Semi-sync from batch 0 (torchrec's default waits 900 batches), so the semantics equal
    :class:`CpuPipeline`'s; plain (not stashed) gradients; refuse an optimizer holding tables."""
    return {"execute_all_batches": True, "start_batch": 0, "stash_gradients": False, "strict": True}


def torchrec_pipeline(
    dmp: Any, optimizer: torch.optim.Optimizer, device: torch.device, clock: SectionClock, frozen: bool
) -> Any:
    """CUDA semi-sync: torchrec's ``TrainPipelineSemiSync`` as shipped, timed. (CUDA sync runs
    :class:`CpuPipeline`'s plain loop.) Not runnable on CPU as shipped; see docs/training.md."""
    cls = timed_semisync_class(clock, frozen)
    return cls(model=dmp, optimizer=optimizer, device=device, **semisync_kwargs())


def run_torchrec_epoch(pipeline: Any, batches: Iterator[TrainBatch], on_step: StepCallback) -> None:
    """Drive a torchrec pipeline over one epoch, then detach it (restores the model's forwards)."""
    try:
        while True:
            try:
                loss, _logits, labels = pipeline.progress(batches)
            except StopIteration:
                break
            on_step(loss, int(labels.shape[0]))
    finally:
        pipeline.detach()
