"""The CUDA path: CUDA-event timing on the streams the lookup runs on, torchrec's
``TrainPipelineSemiSync`` as shipped (nccl, one GPU), frozen epochs on it, and ``ranker train``.

Marked ``gpu``: without CUDA they skip with "no GPU" (tests/trainer/conftest.py);
``benchmarks/gpu.sh`` runs them on a GPU machine.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ranking.trainer.distributed.timing import SectionClock
from ranking.trainer.schedule import FROZEN, JOINT
from tests.trainer.conftest import DAYS, END, ranker_cmd, ranker_env

pytestmark = pytest.mark.gpu


def _busy(n: int = 8) -> None:
    x = torch.randn(2048, 2048, device="cuda")
    for _ in range(n):
        x = x @ x
        x = x / x.norm()


def test_cuda_clock_counts_side_stream_work_as_lookup_not_exposed() -> None:
    """Lookup work on a side stream (as torchrec's data_dist stream) while the training stream
    computes: it is in the lookup, not in the exposed part; work on the training stream is both."""
    side = torch.cuda.Stream()
    clock = SectionClock(cuda=True)
    torch.cuda.synchronize()
    with clock.section("lookup_issue"):
        _busy(2)
    side.wait_stream(torch.cuda.current_stream())
    with clock.section("input_dist", stream=side), torch.cuda.stream(side):
        _busy(16)
    with clock.section("dense_forward", lookup=False):
        _busy(16)
    torch.cuda.current_stream().wait_stream(side)
    share = clock.share(step_seconds=1.0)
    totals = clock.resolve()
    assert totals["input_dist"] > 0 and totals["lookup_issue"] > 0
    assert share.exposed_seconds == pytest.approx(totals["lookup_issue"], rel=1e-6)
    assert share.lookup_seconds > share.exposed_seconds
    assert share.lookup_seconds <= totals["lookup_issue"] + totals["input_dist"] + 1e-9


@pytest.fixture(scope="module")
def cuda_ctx() -> Iterator[object]:
    from ranking.trainer.distributed import setup as distributed

    c = distributed.init_distributed(prefer_cuda=True)
    assert c.backend == "nccl"
    yield c
    distributed.shutdown(c)


@pytest.mark.parametrize("phase", [FROZEN, JOINT])
def test_torchrec_semisync_on_gpu_frozen_keeps_tables_joint_changes_them(
    cuda_ctx, manifest, model_config, phase
) -> None:  # type: ignore[no-untyped-def]
    from ranking.trainer.datasets.window import list_units, plan_epoch, train_batches
    from ranking.trainer.distributed.pipelines import run_torchrec_epoch, torchrec_pipeline
    from ranking.trainer.loop import build_sharded
    from tests.trainer.distributed.test_pipelines import BATCH, snapshot

    stack = build_sharded(model_config, seed=3, ctx=cuda_ctx)
    before = snapshot(stack)
    stack.task.model.embeddings_frozen = phase == FROZEN
    clock = SectionClock(cuda=True)
    plan = plan_epoch(list_units([p.path for p in manifest.train]), 1, BATCH, seed=0, epoch=1)
    pipeline = torchrec_pipeline(stack.dmp, stack.optimizer, cuda_ctx.device, clock, phase == FROZEN)
    steps: list[int] = []
    run_torchrec_epoch(
        pipeline, train_batches(plan, 0, model_config, 1000, 0, 1), lambda loss, n: steps.append(n)
    )
    assert len(steps) == plan.steps
    after = snapshot(stack)
    same_tables = all(torch.equal(before["tables"][k], after["tables"][k]) for k in before["tables"])
    same_state = all(torch.equal(before["table_opt"][k], after["table_opt"][k]) for k in before["table_opt"])
    assert (same_tables and same_state) == (phase == FROZEN)
    assert not all(torch.equal(before["dense"][k], after["dense"][k]) for k in before["dense"])
    totals = clock.resolve()
    assert totals["input_dist"] > 0 and totals["lookup_issue"] > 0 and totals["lookup_wait"] > 0
    assert ("lookup_backward" in totals) == (phase == JOINT)
    share = clock.share(step_seconds=1.0)
    assert 0 < share.exposed_seconds <= share.lookup_seconds


@pytest.mark.parametrize("pipeline", ["sync", "semisync"])
def test_ranker_train_on_gpu(
    window_home: Path, model_config_file: Path, tmp_path: Path, pipeline: str
) -> None:
    proc = subprocess.run(
        ranker_cmd(
            "train",
            "--home",
            str(window_home),
            "--end",
            END.isoformat(),
            "--days",
            str(DAYS),
            "--schedule",
            "F,J",
            "--pipeline",
            pipeline,
            "--batch-size",
            "256",
            "--warm-start",
            "none",
            "--no-register",
            "--model-config",
            str(model_config_file),
            "--out",
            str(tmp_path / "run"),
            "--json",
            "--no-progress",
        ),
        capture_output=True,
        text=True,
        timeout=600,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    assert summary["device"] == "cuda"
    for e in summary["epochs"]:
        assert 0 < e["exposed_lookup_ratio"] <= e["lookup_ratio"] < 1
        assert e["peak_gpu_memory_bytes"] > 0
    if pipeline == "sync":  # every lookup section on the training stream
        for e in summary["epochs"]:
            assert e["exposed_lookup_ratio"] == pytest.approx(e["lookup_ratio"], rel=1e-6)
