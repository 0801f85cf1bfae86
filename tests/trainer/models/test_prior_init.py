"""A from-scratch model starts at the window's save rate (calibrated), a warm start keeps its own."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator

import pytest
import torch

from features.window import WindowPartition
from ranking.trainer.checkpointing.state import local_unsharded
from ranking.trainer.distributed import setup as distributed
from ranking.trainer.loop import build_sharded


@pytest.fixture(scope="module")
def ctx() -> Iterator[distributed.DistContext]:
    context = distributed.init_distributed()
    yield context
    distributed.shutdown(context)


def test_manifest_train_label_rate_is_row_weighted(manifest) -> None:  # type: ignore[no-untyped-def]
    parts = (
        WindowPartition(date=dt.date(2026, 1, 1), path=manifest.train[0].path, rows=100, label_rate=0.01),
        WindowPartition(date=dt.date(2026, 1, 2), path=manifest.train[0].path, rows=300, label_rate=0.05),
    )
    m = manifest.model_copy(update={"train": parts})
    assert m.train_label_rate == pytest.approx((100 * 0.01 + 300 * 0.05) / 400)
    unknown = manifest.model_copy(
        update={"train": (*parts, WindowPartition(date=dt.date(2026, 1, 3), path=parts[0].path, rows=5))}
    )
    assert unknown.train_label_rate is None  # a day without a recorded rate: no guess


def test_scratch_model_predicts_the_prior_and_warm_start_keeps_its_bias(ctx, model_config) -> None:  # type: ignore[no-untyped-def]
    stack = build_sharded(model_config, seed=4, ctx=ctx, prior_rate=0.03)
    bias = float(stack.task.model.head.bias.detach()[0])
    assert bias == pytest.approx(math.log(0.03 / 0.97), rel=1e-6)
    plain = build_sharded(model_config, seed=4, ctx=ctx)
    assert float(plain.task.model.head.bias.detach()[0]) != pytest.approx(bias)
    # a warm start brings its own (trained) bias: the prior must not overwrite it
    state = {
        k: v.detach().clone() for k, v in plain.task.model.state_dict().items() if "sparse_arch" not in k
    }
    state["head.bias"] = torch.tensor([1.5])
    full = {**_unsharded(plain), **state}
    warm = build_sharded(model_config, seed=4, ctx=ctx, init_state=full, prior_rate=0.03)
    assert float(warm.task.model.head.bias.detach()[0]) == pytest.approx(1.5)


def _unsharded(stack) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return {k[len("model.") :]: v for k, v in local_unsharded(stack.dmp.state_dict()).items()}


def test_partial_warm_start_keeps_the_seed_tables_and_takes_the_rest(ctx, model_config) -> None:  # type: ignore[no-untyped-def]
    """--warm-start-scope dense: dense layers (and bias) from the checkpoint, tables fresh."""
    from ranking.trainer.checkpointing.checkpoint import CheckpointError
    from ranking.trainer.loop import TABLE_PREFIX

    fresh = _unsharded(build_sharded(model_config, seed=6, ctx=ctx))
    trained = {k: v + 1.0 for k, v in fresh.items()}  # a "checkpoint" that differs everywhere
    dense_only = {k: v for k, v in trained.items() if not k.startswith(TABLE_PREFIX)}
    assert dense_only and len(dense_only) < len(trained)
    got = _unsharded(build_sharded(model_config, seed=6, ctx=ctx, init_state=dense_only, prior_rate=0.03))
    for key, value in got.items():
        want = fresh[key] if key.startswith(TABLE_PREFIX) else trained[key]
        assert torch.equal(value, want), key
    with pytest.raises(CheckpointError, match="keys this model lacks"):
        build_sharded(model_config, seed=6, ctx=ctx, init_state={"no_such.weight": torch.zeros(1)})
