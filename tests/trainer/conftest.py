"""Fixtures: small seeded windows written to the window contract (real parquet + manifest)."""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from features.windowgen import write_window

END = dt.date(2026, 11, 10)
DAYS = 3
ROWS_PER_DAY = 1500

# tiny tables so state comparisons and checkpoints stay small
TABLE_ROWS = {"user_id": 512, "pin_id": 1024, "user_stats__country": 16, "pin_stats__category": 16}


@pytest.fixture(scope="session")
def window_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    write_window(home, END, DAYS, ROWS_PER_DAY, seed=7, row_group_size=256, eval_rows=1000)
    return home


@pytest.fixture(scope="session")
def manifest(window_home: Path):  # type: ignore[no-untyped-def]
    from features.window import read_window_manifest
    from ranking.core.workspace import Workspace

    return read_window_manifest(Workspace(window_home).window_manifest(END, DAYS))


@pytest.fixture(scope="session")
def model_config():  # type: ignore[no-untyped-def]
    from ranking.trainer.models.config import default_model_config

    return default_model_config(embedding_dim=8, table_rows=TABLE_ROWS, dense_arch=(16, 8), over_arch=(16, 8))


@pytest.fixture
def model_config_file(tmp_path: Path, model_config) -> Path:  # type: ignore[no-untyped-def]
    path = tmp_path / "model_config.json"
    path.write_text(model_config.to_json())
    return path


REPO = Path(__file__).resolve().parents[2]


def ranker_cmd(*args: str) -> list[str]:
    """The project's own entry point (``python -m ranking.cli`` = the ``ranker`` console script),
    so the tests run wherever this Python runs the project, installed or from the checkout."""
    return [sys.executable, "-m", "ranking.cli", *args]


def ranker_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "RANKER_LOG_LEVEL": "WARNING", "PYTHONPATH": path}


def train_request(manifest, cfg, run_dir: Path, schedule: str = "delayed", epochs: int = 2, **kw: Any):  # type: ignore[no-untyped-def]
    """A small, quiet TrainRequest for ``run_training`` (batch 256, 1000-row shuffle buffer)."""
    from ranking.trainer.loop import TrainRequest
    from ranking.trainer.models.config import TrainConfig
    from ranking.trainer.schedule import resolve_schedule

    tc = TrainConfig(
        schedule=resolve_schedule(schedule, epochs),
        schedule_spec=schedule,
        batch_size=256,
        shuffle_buffer_rows=1000,
        seed=kw.pop("seed", 0),
    )
    return TrainRequest(
        manifest=manifest, model_config=cfg, train_config=tc, run_dir=run_dir, progress=False, **kw
    )


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, manifest, model_config) -> Path:  # type: ignore[no-untyped-def]
    """A finished one-epoch run folder (read-only: copy before changing it)."""
    from ranking.trainer.loop import run_training

    run_dir = tmp_path_factory.mktemp("trained") / "run"
    run_training(train_request(manifest, model_config, run_dir, schedule="joint", epochs=1))
    return run_dir


def epoch_state(run_dir: Path, epoch: int) -> dict[str, Any]:
    """Epoch ``epoch``'s sharded checkpoint read back through the consolidated export (the same
    payload as a finished run's model.pt)."""
    import tempfile

    from ranking.trainer.checkpointing.checkpoint import epoch_checkpoint_path, load_checkpoint
    from ranking.trainer.checkpointing.state import export_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "epoch.pt"
        export_checkpoint(epoch_checkpoint_path(run_dir, epoch), out)
        payload = load_checkpoint(out)
        return {
            k: ({n: t.clone() for n, t in v.items()} if k in ("model", "table_optimizer") else v)
            for k, v in payload.items()
        }


NO_GPU = "no GPU (CUDA not available): the CUDA path runs in benchmarks/gpu.sh on a GPU machine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.gpu`` tests need CUDA; elsewhere they skip with the documented reason."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=NO_GPU))
