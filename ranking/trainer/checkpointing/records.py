"""What a checkpoint holds, typed: its meta (``meta.json``, the export's plain values), the
``model.pt`` payload and the compact records of its tables (apart from the reader and the
compaction, which both read them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict

from pydantic import JsonValue

if TYPE_CHECKING:
    import torch

    from ranking.trainer.models.config import ModelConfigRecord, TrainConfigRecord

# a module's (or an optimizer's flat) tensors by name: what torch calls a state dict
StateDict: TypeAlias = "dict[str, torch.Tensor]"


class CheckpointMeta(TypedDict, total=False):
    """A checkpoint's plain values: an epoch checkpoint's ``meta.json`` (ranking.trainer.checkpointing.state)
    and the export's non-tensor keys. Older files lack the newer keys."""

    format: int
    model_config: ModelConfigRecord
    train_config: TrainConfigRecord
    epoch: int
    epochs: list[JsonValue]  # the EpochSummary bodies so far (a resume parses them)
    window_id: str
    feature_version: str
    table_init: dict[str, int]  # table -> the seed whose init its untouched rows hold
    eval: JsonValue  # the final EvalSummary body (the export only)
    world_size: int
    dense_param_groups: list[JsonValue]  # torch's param_groups of the dense optimizer (meta.json only)


class CheckpointPayload(CheckpointMeta, total=False):
    """What ``model.pt`` holds: the meta and the tensors (format 3: tables' unchanged rows left
    out, ``sparse`` records their changed rows; ranking.trainer.checkpointing.compact)."""

    model: StateDict
    table_optimizer: StateDict
    # torch's Optimizer.state_dict(): {"state": {param index: {name: tensor}}, "param_groups": [...]}
    dense_optimizer: OptimizerStateDict
    sparse: dict[str, dict[str, SparseRecord]]


# torch's own alias for an optimizer's state_dict (torch.optim.optimizer.StateDict): torch's shape
OptimizerStateDict: TypeAlias = "torch.optim.optimizer.StateDict"


class ReferenceRecord(TypedDict, total=False):
    """What a sparse record's unchanged rows hold: zeros, or a table's init from a seed."""

    kind: Literal["zeros", "table"]
    table: str
    seed: int


class SparseRecord(TypedDict):
    """One tensor stored as its changed rows over a reference (``payload["sparse"][part][key]``)."""

    shape: list[int]
    rows: torch.Tensor
    values: torch.Tensor
    init: ReferenceRecord
    sha256: str  # of the dense tensor
