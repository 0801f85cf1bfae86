"""Scoring a model on an eval day, streamed, into a score frame (ranking.evaluation.scores).

``score_checkpoint`` is the interface the promotion gate uses: it rebuilds the (unsharded) model
from a checkpoint and the model config stored in or beside it, and scores every row of the eval
parquet in batches, keeping the request/pin keys for per-request grouping.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ranking.evaluation.scores import SCORE_COLUMNS
from ranking.trainer.checkpointing.checkpoint import CheckpointError, load_checkpoint
from ranking.trainer.checkpointing.records import CheckpointMeta, StateDict
from ranking.trainer.datasets.window import (
    check_parquet,
    eval_chunks,
    list_units,
    required_columns,
    to_train_batch,
)
from ranking.trainer.models.config import ModelConfig

if TYPE_CHECKING:
    import pandas as pd

    from ranking.trainer.models.model import RankerModel


def model_config_of(checkpoint: Path, payload: CheckpointMeta) -> ModelConfig:
    """The config inside the checkpoint, else ``model_config.json`` beside it."""
    recorded = payload.get("model_config")
    if isinstance(recorded, dict):
        return ModelConfig.from_dict(dict(recorded))
    beside = checkpoint.parent / "model_config.json"
    if beside.is_file():
        import json

        return ModelConfig.from_dict(json.loads(beside.read_text()))
    raise CheckpointError(f"{checkpoint}: no model config inside it and no model_config.json beside it")


def build_scoring_model(cfg: ModelConfig, state: StateDict) -> RankerModel:
    import torch

    from ranking.trainer.models.model import RankerModel

    # tables on meta, then the checkpoint's (memory-mapped) tensors assigned as they are: a large
    # table is neither initialised nor copied before it is scored with
    model = RankerModel(cfg, device=torch.device("cpu"), table_device=torch.device("meta"))
    expected = set(model.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise CheckpointError(
            f"checkpoint does not fit its model config: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    for key, value in state.items():
        want = model.state_dict()[key]
        if tuple(value.shape) != tuple(want.shape):
            raise CheckpointError(
                f"checkpoint does not fit its model config: {key} {tuple(value.shape)} != {tuple(want.shape)}"
            )
    model.load_state_dict(state, assign=True)
    model.eval()
    return model


def model_device(model: Any) -> Any:
    """The device the model computes on: where its dense parameters live (a sharded model's
    tables may sit elsewhere or be sharded; its dense layers are always on the compute device)."""
    import torch

    dense = getattr(model, "dense_arch", None)
    for param in (dense if dense is not None else model).parameters():
        return param.device
    return torch.device("cpu")


def score_model(model: RankerModel, paths: list[Path], batch_size: int = 8192) -> pd.DataFrame:
    """Score every row of ``paths`` (in file order) -> request_id, pin_id, saved, score.

    Batches are decoded on the host and moved to the model's device; scores come back to the host."""
    import pandas as pd
    import torch

    cfg = model.config
    device = model_device(model)
    keys_r: list[np.ndarray] = []
    keys_p: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    with torch.no_grad():
        for chunk in eval_chunks(paths, cfg, batch_size):
            batch = to_train_batch(chunk, cfg, weight=0.0).to(device, non_blocking=True)
            logits = model(batch.dense_features, batch.sparse_features)
            scores.append(torch.sigmoid(logits.double()).cpu().numpy())
            keys_r.append(chunk.request_ids)  # type: ignore[arg-type]
            keys_p.append(chunk.pin_ids)  # type: ignore[arg-type]
            labels.append(chunk.labels.astype(np.int8))
    if not scores:
        return pd.DataFrame({c: [] for c in SCORE_COLUMNS})
    return pd.DataFrame(
        {
            "request_id": np.concatenate(keys_r),
            "pin_id": np.concatenate(keys_p),
            "saved": np.concatenate(labels),
            "score": np.concatenate(scores),
        }
    )


def score_checkpoint(
    checkpoint: Path, eval_parquet: Path | list[Path], batch_size: int = 8192
) -> pd.DataFrame:
    """Scores of a checkpoint on eval parquet: request_id, pin_id, saved, score (probability)."""
    checkpoint = Path(checkpoint)
    paths = [Path(p) for p in (eval_parquet if isinstance(eval_parquet, list) else [eval_parquet])]
    payload = load_checkpoint(checkpoint)
    cfg = model_config_of(checkpoint, payload)
    model = build_scoring_model(cfg, payload["model"])
    cols = required_columns(cfg, eval_keys=True)
    for p in paths:
        rows = sum(u.rows for u in list_units([p])) if p.is_file() else 0
        check_parquet(p, rows, cols, "eval")
    return score_model(model, paths, batch_size)
