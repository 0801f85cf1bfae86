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

from typing import TYPE_CHECKING, Any

from ranking.core.errors import RankerError
from ranking.trainer.config import REMEDIES, ModelConfig
from ranking.trainer.loop import TABLE_PREFIX

if TYPE_CHECKING:
    import torch

DMP_PREFIX = "model."  # DMP(TrainTask) state-dict keys: "model." + the RankerModel's


def seed_table_state(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """The tables' initial weights under ``seed``: what ``build_sharded`` starts a model with.

    Built the same way (seed, then the whole model on CPU) inside a forked RNG, so the caller's
    random stream is left where it was."""
    import torch

    from ranking.trainer.model import RankerModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = RankerModel(cfg, device=torch.device("cpu"))
    return {k: v.detach() for k, v in model.state_dict().items() if k.startswith(TABLE_PREFIX)}


def reset_tables(dmp: Any, init: dict[str, torch.Tensor]) -> None:
    """Copy ``init`` (unsharded) into the sharded tables of ``dmp`` and zero their fused
    optimizer state (each rank writes its own shards; no collective)."""
    import torch

    from ranking.trainer import distributed

    live = {
        key[len(DMP_PREFIX) :]: value
        for key, value in dmp.state_dict().items()
        if key.startswith(DMP_PREFIX + TABLE_PREFIX)
    }
    if set(live) != set(init):
        raise RankerError(
            f"table re-initialisation does not fit the model: {sorted(set(live) ^ set(init))[:5]}"
        )
    for name, target in live.items():
        distributed.copy_full_into(target, init[name])
    with torch.no_grad():
        for value in distributed.table_optimizer_state(dmp).values():
            if hasattr(value, "local_shards"):
                for shard in value.local_shards():
                    shard.tensor.zero_()
            else:
                value.zero_()


def apply_epoch_start(remedy: str, dmp: Any, cfg: ModelConfig, seed: int) -> dict[str, Any] | None:
    """Run ``remedy`` before an epoch; a record for the epoch's stats, or None for ``none``."""
    if remedy == "none":
        return None
    if remedy == "meda":
        reset_tables(dmp, seed_table_state(cfg, seed))
        return {"name": "meda", "tables": "seed init", "table_optimizer": "reset"}
    raise RankerError(f"unknown remedy {remedy!r}: choose from {', '.join(REMEDIES)}")
