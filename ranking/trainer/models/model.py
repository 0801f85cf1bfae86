"""The save ranker on torchrec modules, and the training task that wraps it.

``RankerModel``: EmbeddingBagCollection over the sparse features (one table each) + an MLP over
the dense features -> DCNv2 low-rank cross layers -> MLP -> one save logit.

``TrainTask`` is what DistributedModelParallel wraps: ``forward(batch)`` returns
``(loss, (loss, logits, labels))`` as torchrec's train pipelines expect, and reads the sparse
features only as ``batch.sparse_features`` so that torchrec's pipeline rewrite can pipeline the
sharded EBC (CUDA path). The CPU pipelines route that call to embeddings looked up earlier the
same way torchrec does (ranking.trainer.distributed.pipelines.EmbeddingInjector).

Freezing: when ``embeddings_frozen`` is set the pooled embeddings are detached in forward, so no
gradient reaches any table and the fused table optimizer never runs (its state stays put).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torchrec.streamable import Pipelineable

from ranking.trainer.models.config import ModelConfig, OptimizerConfig

if TYPE_CHECKING:
    from torchrec import KeyedJaggedTensor


@dataclass
class TrainBatch(Pipelineable):
    """One (local) batch. ``weights`` carry the loss normalisation: 1 / rows in the global batch.

    A torchrec ``Pipelineable`` (``to``, ``record_stream``), so torchrec's train pipelines can
    move it between devices and streams.
    """

    dense_features: torch.Tensor  # [B, D] float32 (normalised)
    sparse_features: KeyedJaggedTensor  # one id per row per feature
    labels: torch.Tensor  # [B] float32 0/1
    weights: torch.Tensor  # [B] float32

    def to(self, device: torch.device, non_blocking: bool = False) -> TrainBatch:
        return TrainBatch(
            dense_features=self.dense_features.to(device=device, non_blocking=non_blocking),
            sparse_features=self.sparse_features.to(device=device, non_blocking=non_blocking),
            labels=self.labels.to(device=device, non_blocking=non_blocking),
            weights=self.weights.to(device=device, non_blocking=non_blocking),
        )

    def record_stream(self, stream: Any) -> None:
        self.dense_features.record_stream(stream)
        self.sparse_features.record_stream(stream)
        self.labels.record_stream(stream)
        self.weights.record_stream(stream)

    def pin_memory(self) -> TrainBatch:
        return TrainBatch(
            self.dense_features.pin_memory(),
            self.sparse_features.pin_memory(),
            self.labels.pin_memory(),
            self.weights.pin_memory(),
        )

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _embedding_bag_configs(cfg: ModelConfig) -> list[Any]:
    from torchrec import EmbeddingBagConfig, PoolingType

    return [
        EmbeddingBagConfig(
            name=t.name,
            embedding_dim=t.embedding_dim,
            num_embeddings=t.num_embeddings,
            feature_names=[t.feature],
            pooling=PoolingType.SUM,
        )
        for t in cfg.tables
    ]


def pooled_in_table_order(pooled: Any, features: tuple[str, ...]) -> torch.Tensor:
    """[B, sum of dims] in the model config's feature order. A sharded EBC returns its KeyedTensor
    grouped by shard (e.g. rank 0's tables first), not in config order."""
    if tuple(pooled.keys()) == features:
        return pooled.values()
    by_key = pooled.to_dict()
    return torch.cat([by_key[f] for f in features], dim=1)


# a leaf for torch.fx: torchrec's pipeline traces TrainTask and cannot iterate a Proxy's keys
torch.fx.wrap("pooled_in_table_order")


class RankerModel(nn.Module):
    """``table_device="meta"`` builds the tables without allocating them: DistributedModelParallel
    then materialises each rank's shards (ranking.trainer.models.init fills them from the seed), and a
    scoring model takes the checkpoint's tensors as they are (``load_state_dict(assign=True)``)."""

    def __init__(
        self, cfg: ModelConfig, device: torch.device | None = None, table_device: torch.device | None = None
    ) -> None:
        from torchrec import EmbeddingBagCollection
        from torchrec.modules.crossnet import LowRankCrossNet
        from torchrec.modules.mlp import MLP

        super().__init__()
        device = device or torch.device("cpu")
        self.config = cfg
        self.sparse_arch = EmbeddingBagCollection(
            tables=_embedding_bag_configs(cfg), device=table_device or device
        )
        self.dense_arch = MLP(len(cfg.dense_features), list(cfg.dense_arch), device=device)
        interaction_dim = cfg.dense_arch[-1] + sum(t.embedding_dim for t in cfg.tables)
        self.cross = LowRankCrossNet(interaction_dim, cfg.cross_layers, low_rank=cfg.cross_rank).to(device)
        self.over_arch = MLP(interaction_dim, list(cfg.over_arch), device=device)
        self.head = nn.Linear(cfg.over_arch[-1], 1, device=device)
        self.embeddings_frozen = False

    def interact(self, dense_features: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        """Logits from dense features and the pooled embeddings ([B, sum of dims], table order)."""
        if self.embeddings_frozen:
            pooled = pooled.detach()
        x = torch.cat([self.dense_arch(dense_features), pooled], dim=1)
        return self.head(self.over_arch(self.cross(x))).squeeze(-1)

    def forward(self, dense_features: torch.Tensor, sparse_features: KeyedJaggedTensor) -> torch.Tensor:
        pooled = pooled_in_table_order(self.sparse_arch(sparse_features), self.config.sparse_features)
        return self.interact(dense_features, pooled)


class TrainTask(nn.Module):
    """Model + weighted BCE loss; the module DistributedModelParallel shards.

    Row weights make each rank's loss its share of the global-batch mean (they sum to it over
    ranks). DDP averages dense gradients over ranks and torchrec divides the embedding gradients
    by the world size in the all-to-all backward (``comm_ops.GRADIENT_DIVISION``), so the loss
    that is backpropagated is scaled by ``world_size``: both then get exactly the gradient of the
    global-batch mean, whatever the split across ranks. The reported loss is unscaled.
    """

    def __init__(self, model: RankerModel, world_size: int = 1) -> None:
        super().__init__()
        self.model = model
        self.world_size = world_size

    def forward(
        self, batch: TrainBatch
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        # one straight path, reading only batch.sparse_features for the EBC: torchrec's pipeline
        # rewrite (fx) must see the sharded EBC called on a batch attribute to pipeline it
        logits = self.model(batch.dense_features, batch.sparse_features)
        per_row = nn.functional.binary_cross_entropy_with_logits(logits, batch.labels, reduction="none")
        loss = (per_row * batch.weights).sum()
        return loss * self.world_size, (loss.detach(), logits.detach(), batch.labels)


def apply_table_optimizer(model: RankerModel, opt: OptimizerConfig) -> None:
    """Fuse the table optimizer into the embedding backward (fbgemm TBE): tables never reach the
    dense optimizer, which torchrec's semi-sync pipeline requires."""
    from torchrec.optim import PartialRowWiseAdam, RowWiseAdagrad
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

    cls: type[torch.optim.Optimizer]
    kwargs: dict[str, float] = {"lr": opt.lr, "eps": opt.eps, "weight_decay": opt.weight_decay}
    if opt.name == "rowwise_adagrad":
        cls = RowWiseAdagrad
    elif opt.name == "rowwise_adam":
        cls = PartialRowWiseAdam
    else:
        cls = torch.optim.Adam
    apply_optimizer_in_backward(cls, model.sparse_arch.parameters(), kwargs)


def dense_parameters(module: nn.Module) -> list[nn.Parameter]:
    """Parameters outside the embedding tables (by name: anything not under ``sparse_arch``)."""
    return [p for name, p in module.named_parameters() if "sparse_arch" not in name]


def build_dense_optimizer(params: list[nn.Parameter], opt: OptimizerConfig) -> torch.optim.Optimizer:
    if opt.name == "adam":
        return torch.optim.Adam(params, lr=opt.lr, eps=opt.eps, weight_decay=opt.weight_decay)
    if opt.name == "adagrad":
        return torch.optim.Adagrad(params, lr=opt.lr, eps=opt.eps, weight_decay=opt.weight_decay)
    return torch.optim.SGD(params, lr=opt.lr, weight_decay=opt.weight_decay)
