"""Eval-day scoring of a checkpoint (the gate's interface) and the metrics of its score frame."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from ranking.core.errors import DataValidationError
from ranking.evaluation.scores import metrics_of
from ranking.trainer.checkpointing.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ranking.trainer.evaluation.scoring import score_checkpoint


def test_scores_stream_in_any_batch_size_with_the_same_result(trained: Path, manifest) -> None:  # type: ignore[no-untyped-def]
    big = score_checkpoint(trained / "model.pt", manifest.eval.path, batch_size=100_000)
    small = score_checkpoint(trained / "model.pt", [manifest.eval.path], batch_size=97)
    assert list(big.columns) == ["request_id", "pin_id", "saved", "score"]
    raw = pq.read_table(manifest.eval.path, columns=["request_id", "pin_id", "saved"]).to_pandas()
    assert len(big) == len(raw)  # every row scored, in file order
    assert (big["request_id"] == raw["request_id"]).all() and (big["pin_id"] == raw["pin_id"]).all()
    assert (big["saved"] == raw["saved"]).all()
    np.testing.assert_allclose(small["score"], big["score"], rtol=0, atol=1e-6)
    assert big["score"].between(0, 1).all() and big["score"].nunique() > 10
    # the run's own eval_scores.parquet comes from the same scoring path
    written = pd.read_parquet(trained / "eval_scores.parquet")
    np.testing.assert_allclose(written["score"], big["score"], rtol=0, atol=1e-6)


def test_metrics_group_by_request(trained: Path, manifest) -> None:  # type: ignore[no-untyped-def]
    scores = score_checkpoint(trained / "model.pt", manifest.eval.path)
    m = metrics_of(scores)
    assert m.rows == len(scores)
    assert m.requests_with_save == scores.groupby("request_id")["saved"].max().sum()
    # HIT@3 by hand: per request, saved pins among the 3 highest scores (ties: file order)
    hits = saves = 0
    for _, g in scores.groupby("request_id", sort=False):
        top = g.sort_values("score", ascending=False, kind="stable").head(3)
        hits += int(top["saved"].sum())
        saves += int(g["saved"].sum())
    assert m.save_hit_at_3 == pytest.approx(hits / saves)
    assert json.loads((trained / "eval.json").read_text())["save_hit_at_3"] == pytest.approx(m.save_hit_at_3)
    assert 0.5 < m.auc <= 1.0  # the fixture's saves are learnable


def test_score_checkpoint_reads_the_config_beside_it_and_rejects_bad_input(
    trained: Path, tmp_path: Path, manifest
) -> None:  # type: ignore[no-untyped-def]
    payload = load_checkpoint(trained / "model.pt")
    bare = {"model": payload["model"]}
    (tmp_path / "v1").mkdir()
    save_checkpoint(tmp_path / "v1" / "model.pt", bare)
    with pytest.raises(CheckpointError, match="no model config"):
        score_checkpoint(tmp_path / "v1" / "model.pt", manifest.eval.path)
    (tmp_path / "v1" / "model_config.json").write_text((trained / "model_config.json").read_text())
    beside = score_checkpoint(tmp_path / "v1" / "model.pt", manifest.eval.path)
    assert len(beside) == manifest.eval.rows
    table = pq.read_table(manifest.eval.path).drop_columns(["request_id"])
    pq.write_table(table, tmp_path / "no_keys.parquet")
    with pytest.raises(DataValidationError, match=r"lacks columns \['request_id'\]"):
        score_checkpoint(trained / "model.pt", tmp_path / "no_keys.parquet")
    broken = dict(payload["model"])
    broken.pop("head.weight")
    save_checkpoint(tmp_path / "broken.pt", {**payload, "model": broken})
    with pytest.raises(CheckpointError, match="does not fit"):
        score_checkpoint(tmp_path / "broken.pt", manifest.eval.path)
    assert torch.equal(
        payload["model"]["head.weight"], load_checkpoint(trained / "model.pt")["model"]["head.weight"]
    )


class _ModelOnAnotherDevice(torch.nn.Module):
    """A stand-in for a model on a GPU while the batches are decoded on the host: its parameters
    live on the meta device, and it records where its inputs were."""

    def __init__(self, config) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.config = config
        self.dense_arch = torch.nn.Linear(1, 1, device="meta")
        self.seen: set[str] = set()

    def forward(self, dense_features: torch.Tensor, sparse_features) -> torch.Tensor:  # type: ignore[no-untyped-def]
        self.seen |= {str(dense_features.device), str(sparse_features.values().device)}
        self.seen |= {str(sparse_features.lengths().device)}
        return torch.zeros(dense_features.shape[0])  # scores leave the device as the model returns them


def test_scoring_feeds_the_model_on_the_device_of_its_parameters(manifest, model_config) -> None:  # type: ignore[no-untyped-def]
    from ranking.trainer.evaluation.scoring import model_device, score_model

    model = _ModelOnAnotherDevice(model_config)
    assert model_device(model) == torch.device("meta")
    scores = score_model(model, [manifest.eval.path], batch_size=500)  # type: ignore[arg-type]
    assert model.seen == {"meta"}  # every input tensor moved to the model's device, none left on the host
    assert len(scores) == manifest.eval.rows and (scores["score"] == 0.5).all()
