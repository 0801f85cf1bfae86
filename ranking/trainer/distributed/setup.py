"""Process group, DistributedModelParallel, and copying unsharded state (a warm start) into shards.

One code path for every world size: a single process runs a gloo group of size 1 (an in-memory
store, no port), torchrun-launched workers join the group torchrun describes (gloo on CPU, nccl
on GPU). The tables are always sharded by torchrec's planner onto the fused fbgemm kernel
(table- or row-wise; data-parallel tables cannot be pipelined by semi-sync), or column-wise alone
when ``$RANKER_SHARDING_TYPES`` says so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ranking.core.errors import RankerError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from ranking.trainer.checkpointing.records import StateDict

# column-wise is left out of the planner's choice: row-wise Adagrad keeps one momentum per row per
# column shard ([rows x shards]), so a table trains differently depending on how it is cut, and
# the planner's pick among several types may change with the world size (docs/training.md)
SHARDING_TYPES = ("table_wise", "row_wise")
# column-wise only on its own: torchrec cuts a table into column blocks of the smallest divisor of
# its dim >= 128 (a multiple of 4), whatever the world size, so its momentum [rows x blocks] keeps
# its shape and DCP reshards it like any other tensor
COLUMN_WISE = "column_wise"
# narrows the planner's choice ("row_wise", "table_wise,row_wise") or picks column-wise alone: an
# environment variable so that it reaches every torchrun worker (tests force row-wise at 2 ranks)
SHARDING_TYPES_ENV = "RANKER_SHARDING_TYPES"


def sharding_types() -> tuple[str, ...]:
    """The sharding types the planner may choose from: ``SHARDING_TYPES``, or those named
    (comma-separated) by ``$RANKER_SHARDING_TYPES``: some of ``SHARDING_TYPES``, or column-wise
    alone. Anything else is refused."""
    raw = os.environ.get(SHARDING_TYPES_ENV, "").strip()
    if not raw:
        return SHARDING_TYPES
    chosen = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if chosen == (COLUMN_WISE,):
        return chosen
    bad = [t for t in chosen if t not in SHARDING_TYPES]
    if bad or not chosen:
        raise RankerError(
            f"{SHARDING_TYPES_ENV}={raw!r}: choose from {', '.join(SHARDING_TYPES)} (comma-separated), "
            f"or {COLUMN_WISE} alone (its optimizer state reshards only while every table keeps its cut)"
        )
    return chosen


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    owns_group: bool  # we created the process group (and tear it down)

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class _LibraryNoise:
    """Drops below-ERROR records that torchrec/torch log through the root logger
    (``logging.warning(...)`` in their modules), keeping everyone else's."""

    _PATHS = ("/torchrec/", "/torch/distributed/", "/torch/fx/", "/fbgemm_gpu/")

    def filter(self, record: Any) -> bool:
        import logging

        return record.levelno >= logging.ERROR or not any(p in record.pathname for p in self._PATHS)


_NOISE_FILTER = _LibraryNoise()


def quiet_library_noise() -> None:
    """torchrec/torch warn on every run about things this setup does on purpose (a directly built
    topology for the planner, ShardedTensor state dicts): keep them out of the job's log unless
    debugging. Only their records are dropped; the trainer's own log lines stay."""
    import logging
    import warnings

    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        return
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(torch|torchrec|fbgemm_gpu)(\.|$)")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(torch|torchrec|fbgemm_gpu)(\.|$)")
    warnings.filterwarnings(
        "ignore", category=DeprecationWarning, module=r"(torch|torchrec|fbgemm_gpu)(\.|$)"
    )
    # ShardedTensor's deprecation, raised from our unsharding code
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"ranking\.trainer\.distributed")
    for name in ("torchrec", "torch.distributed", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)
    root = logging.getLogger()
    if _NOISE_FILTER not in root.filters:
        root.addFilter(_NOISE_FILTER)


def launched_by_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def init_distributed(prefer_cuda: bool = True) -> DistContext:
    import torch
    import torch.distributed as dist

    cuda = prefer_cuda and torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    if launched_by_torchrun():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group(backend=backend)
            owns = True
        else:
            owns = False
        return DistContext(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, owns)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    owns = False
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
        owns = True
    return DistContext(dist.get_rank(), dist.get_world_size(), 0, device, backend, owns)


def shutdown(ctx: DistContext) -> None:
    import torch.distributed as dist

    if ctx.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def shard(task: nn.Module, table_names: Sequence[str], ctx: DistContext) -> Any:
    """Wrap ``task`` in DistributedModelParallel with fused tables sharded by the planner, each
    table one of :func:`sharding_types`."""
    import torch.distributed as dist
    from torchrec.distributed import DistributedModelParallel
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology

    allowed = list(sharding_types())
    # torchrec offers no row-wise sharding on CPU: a type named in the environment is offered
    # anyway (row-wise on gloo needs equal batches on every rank at every step, docs/training.md)
    forced = allowed if os.environ.get(SHARDING_TYPES_ENV, "").strip() else []

    class Sharder(EmbeddingBagCollectionSharder):
        def sharding_types(self, compute_device_type: str) -> list[str]:
            offered = list(super().sharding_types(compute_device_type))
            return offered + [t for t in forced if t not in offered]

    topology = Topology(world_size=ctx.world_size, compute_device=ctx.device.type)
    # tiny tables would be planned data-parallel, which semi-sync cannot pipeline
    constraints = {
        name: ParameterConstraints(sharding_types=allowed, compute_kernels=["fused"]) for name in table_names
    }
    sharders: list[Any] = [Sharder()]
    planner = EmbeddingShardingPlanner(topology=topology, constraints=constraints)
    plan = planner.collective_plan(task, sharders, dist.GroupMember.WORLD)
    return DistributedModelParallel(task, device=ctx.device, plan=plan, sharders=sharders)


def sharding_summary(dmp: Any) -> dict[str, str]:
    """{table: "sharding type/kernel@ranks"} from the plan DMP used."""
    out: dict[str, str] = {}
    for module_plan in dmp.plan.plan.values():
        for table, param in module_plan.items():
            ranks = ",".join(str(r) for r in (param.ranks or []))
            out[table] = f"{param.sharding_type}/{param.compute_kernel}@{ranks}"
    return out


def unwrap(dmp: Any) -> nn.Module:
    """The user module inside DMP (and DDP)."""
    return dmp.module if hasattr(dmp, "module") else dmp


def _is_sharded(value: Any) -> bool:
    return hasattr(value, "local_shards") and hasattr(value, "metadata")


def copy_full_into(target: Any, full: torch.Tensor) -> None:
    """Copy a dense tensor into a ShardedTensor's local shards (or a plain tensor) in place."""
    import torch

    with torch.no_grad():
        if not _is_sharded(target):
            target.copy_(full.to(target.device))
            return
        if tuple(target.metadata().size) != tuple(full.shape):
            raise RankerError(
                f"state shape {tuple(full.shape)} does not match {tuple(target.metadata().size)}"
            )
        for shard_ in target.local_shards():
            offsets = shard_.metadata.shard_offsets
            sizes = shard_.metadata.shard_sizes
            index = tuple(slice(o, o + s) for o, s in zip(offsets, sizes, strict=True))
            shard_.tensor.copy_(full[index].to(shard_.tensor.device))


def load_state_dict_into(state: StateDict, full: StateDict, prefix: str = "") -> None:
    """Copy an unsharded state dict into a live (possibly sharded) one; keys must match exactly."""
    wanted = {k[len(prefix) :] if prefix and k.startswith(prefix) else k for k in state}
    missing = sorted(wanted - set(full))
    unexpected = sorted(set(full) - wanted)
    if missing or unexpected:
        raise RankerError(
            f"checkpoint does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    for key, target in state.items():
        name = key[len(prefix) :] if prefix and key.startswith(prefix) else key
        copy_full_into(target, full[name])


def table_optimizer_state(dmp: Any) -> StateDict:
    """Flat {param.state_name: (sharded) tensor} of the fused table optimizer."""
    flat: StateDict = {}
    for param_key, states in dmp.fused_optimizer.state_dict()["state"].items():
        for state_key, value in states.items():
            if hasattr(value, "size"):
                flat[f"{param_key}::{state_key}"] = value
    return flat


def torchrun_command(nproc: int, module_argv: Sequence[str], module: str = "ranking.cli") -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc-per-node N -m <module> ...``"""
    if nproc < 1:
        raise RankerError(f"--nproc must be >= 1, got {nproc}")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "-m",
        module,
        *module_argv,
    ]
