"""Remedies for multi-epoch overfitting of the embedding tables, applied at each epoch start.

``meda`` (Fan et al., arXiv 2407.01607, "Multi-Epoch learning with Data Augmentation"): at the
start of every epoch the embedding tables go back to their initial weights, the dense layers
(and their optimizer) carry over. Each table row is then trained on the window once per epoch
from scratch, so no embedding is fitted to data it has already seen, while the dense layers learn
over several epochs against different embedding spaces. What we do exactly, and where it departs
from the paper: docs/training.md "MEDA".

The tables' fused optimizer state (row-wise Adagrad's per-row sum of squared gradients, Adam's
moments) is reset with them: it describes the old rows' gradient history, and carried over it
would give the re-initialised rows the step sizes of a table at the end of training (Adagrad's
effective rate only shrinks), not those of a fresh table.
"""

from __future__ import annotations

from typing import Any

from ranking.core.errors import RankerError
from ranking.core.summaries import RemedySummary
from ranking.trainer.models.config import REMEDIES, ModelConfig


def reset_tables(dmp: Any, cfg: ModelConfig, seed: int) -> None:
    """Refill this rank's table shards with the seed's initial values (what ``build_sharded``
    starts from) and zero their fused optimizer state. No collective, no unsharded copy."""
    import torch

    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.models.init import init_table_shards

    init_table_shards(dmp, cfg, seed)
    with torch.no_grad():
        for value in distributed.table_optimizer_state(dmp).values():
            if hasattr(value, "local_shards"):
                for shard in value.local_shards():
                    shard.tensor.zero_()
            else:
                value.zero_()


def apply_epoch_start(remedy: str, dmp: Any, cfg: ModelConfig, seed: int) -> RemedySummary | None:
    """Run ``remedy`` before an epoch; a record for the epoch's stats, or None for ``none``."""
    if remedy == "none":
        return None
    if remedy == "meda":
        reset_tables(dmp, cfg, seed)
        return RemedySummary(name="meda", tables="seed init", table_optimizer="reset")
    raise RankerError(f"unknown remedy {remedy!r}: choose from {', '.join(REMEDIES)}")
