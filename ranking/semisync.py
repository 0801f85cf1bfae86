"""Training pipelines: ``sync`` and ``semisync`` (semi-synchronous embedding prefetch).

Semantics (the same as torchrec's ``TrainPipelineSemiSync``): for batch i the dense forward runs,
then the embedding lookup of batch i+1 is issued, then batch i's backward and table update run.
Batch i+1 therefore reads the tables as they were before batch i's update (one-step-stale reads),
and its lookup (and, when sharded, its all-to-all) can overlap batch i's backward. Dense layers
stay synchronous: batch i+1's dense forward sees the dense update of batch i.

Both pipelines split the step the way torchrec's semi-sync does: the dense forward reads a detached
copy of the pooled embeddings, ``loss.backward()`` yields the dense gradients and the gradient of
the pooled embeddings, and ``autograd.backward(pooled, grad)`` is the embedding backward (the fused
fbgemm optimizer updates the rows). That split is what makes the lookup time measurable and lets a
frozen epoch skip the embedding backward (and the lookup's autograd graph) altogether.

CPU: :class:`CpuPipeline` below (torchrec's pipeline fails on CPU as shipped: it records CUDA-style
streams on CPU tensors). CUDA: :func:`torchrec_pipeline` uses torchrec's ``TrainPipelineSemiSync`` /
``TrainPipelineSparseDist`` as shipped, with CUDA-event timers around the lookup stages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from ranking.model import TrainBatch, pooled_in_table_order
from ranking.timing import SectionClock

StepCallback = Callable[[torch.Tensor, int], None]  # (this rank's share of the batch loss, local rows)


class CpuPipeline:
    """The sync and semi-sync step loops over a DistributedModelParallel(TrainTask)."""

    def __init__(
        self, dmp: Any, optimizer: torch.optim.Optimizer, clock: SectionClock, semisync: bool
    ) -> None:
        from ranking.distributed import unwrap

        self.dmp = dmp
        self.optimizer = optimizer
        self.clock = clock
        self.semisync = semisync
        model: Any = unwrap(dmp).model
        self.sparse_arch: Any = model.sparse_arch
        self.features: tuple[str, ...] = model.config.sparse_features

    def _issue(self, batch: TrainBatch, frozen: bool) -> Any:
        if frozen:  # no autograd graph for a lookup nobody will backpropagate into
            with torch.no_grad():
                return self.sparse_arch(batch.sparse_features)
        return self.sparse_arch(batch.sparse_features)

    def _forward(
        self, batch: TrainBatch, pooled: torch.Tensor, frozen: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss to backpropagate, this rank's share of the batch loss, the pooled leaf)"""
        leaf = pooled.detach().requires_grad_(not frozen)
        loss, (reported, _, _) = self.dmp(batch, pooled=leaf)
        return loss, reported, leaf

    def _backward_and_update(
        self, loss: torch.Tensor, pooled: torch.Tensor, leaf: torch.Tensor, frozen: bool
    ) -> None:
        loss.backward()
        if not frozen:
            with self.clock.section("lookup_backward"):
                torch.autograd.backward(pooled, leaf.grad)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def run_epoch(self, batches: Iterator[TrainBatch], frozen: bool, on_step: StepCallback) -> None:
        if self.semisync:
            self._run_semisync(batches, frozen, on_step)
        else:
            self._run_sync(batches, frozen, on_step)

    def _run_sync(self, batches: Iterator[TrainBatch], frozen: bool, on_step: StepCallback) -> None:
        for batch in batches:
            with self.clock.section("lookup_forward"):
                pooled = pooled_in_table_order(self._issue(batch, frozen).wait(), self.features)
            loss, reported, leaf = self._forward(batch, pooled, frozen)
            self._backward_and_update(loss, pooled, leaf, frozen)
            on_step(reported, len(batch))

    def _run_semisync(self, batches: Iterator[TrainBatch], frozen: bool, on_step: StepCallback) -> None:
        current = next(batches, None)
        if current is None:
            return
        with self.clock.section("lookup_issue"):
            pending = self._issue(current, frozen)
        while current is not None:
            with self.clock.section("lookup_wait"):
                pooled = pooled_in_table_order(pending.wait(), self.features)
            upcoming = next(batches, None)
            loss, reported, leaf = self._forward(current, pooled, frozen)
            if upcoming is not None:
                # issued before this batch's table update: the next batch reads one-step-stale rows
                with self.clock.section("lookup_issue"):
                    pending = self._issue(upcoming, frozen)
            self._backward_and_update(loss, pooled, leaf, frozen)
            on_step(reported, len(current))
            current = upcoming


def torchrec_pipeline(
    kind: str, dmp: Any, optimizer: torch.optim.Optimizer, device: torch.device, clock: SectionClock
) -> Any:
    """CUDA: torchrec's own pipelines. ``semisync`` starts semi-sync at batch 0 (torchrec's
    default waits 900 batches), so its semantics equal :class:`CpuPipeline`'s. Not runnable on
    CPU; see docs/training.md."""
    from torchrec.distributed.train_pipeline.train_pipelines import (
        TrainPipelineSemiSync,
        TrainPipelineSparseDist,
    )

    if kind == "sync":
        return TrainPipelineSparseDist(
            model=dmp, optimizer=optimizer, device=device, execute_all_batches=True
        )

    class TimedSemiSync(TrainPipelineSemiSync):  # type: ignore[misc,valid-type]
        def start_embedding_lookup(self, batch: Any, context: Any) -> None:
            with clock.section("lookup_issue"):
                super().start_embedding_lookup(batch, context)

        def embedding_backward(self, context: Any) -> None:
            with clock.section("lookup_backward"):
                super().embedding_backward(context)

    return TimedSemiSync(
        model=dmp,
        optimizer=optimizer,
        device=device,
        execute_all_batches=True,
        start_batch=0,
        stash_gradients=False,
        strict=True,
    )


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
