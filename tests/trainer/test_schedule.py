from __future__ import annotations

import pytest

from ranking.trainer.models.config import ConfigError
from ranking.trainer.schedule import resolve_schedule, schedule_letters


@pytest.mark.parametrize(
    ("spec", "epochs", "letters"),
    [
        ("delayed", None, "F,J"),  # DEFAULT_EPOCHS: the default recipe's F,J
        ("delayed", 4, "F,J,J,J"),
        ("delayed", 1, "F"),
        ("joint", 2, "J,J"),
        ("frozen", 3, "F,F,F"),
        ("joint_then_frozen", 3, "J,F,F"),
        ("F,J,J", None, "F,J,J"),
        ("f, j", 2, "F,J"),
    ],
)
def test_schedules_resolve_to_one_phase_per_epoch(spec: str, epochs: int | None, letters: str) -> None:
    assert schedule_letters(resolve_schedule(spec, epochs)) == letters


@pytest.mark.parametrize(
    ("spec", "epochs", "message"),
    [
        ("sometimes", None, "unknown schedule"),
        ("F,X", None, "unknown schedule"),
        ("", None, "unknown schedule"),
        ("F,J", 3, "has 2 epochs but --epochs is 3"),
        ("delayed", 0, "epochs must be > 0"),
    ],
)
def test_bad_schedules_are_clear_errors(spec: str, epochs: int | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_schedule(spec, epochs)


def test_auto_pipeline_is_semisync_on_cpu_and_sync_on_cuda() -> None:
    from ranking.trainer.models.config import PIPELINES, ConfigError, TrainConfig, resolve_pipeline

    assert TrainConfig(schedule=("joint",)).pipeline == "auto" == PIPELINES[0]
    assert resolve_pipeline("auto", "cpu") == "semisync"
    assert resolve_pipeline("auto", "cuda") == "sync"
    for explicit in ("sync", "semisync"):  # an explicit choice is kept on every device
        assert resolve_pipeline(explicit, "cuda") == resolve_pipeline(explicit, "cpu") == explicit
    with pytest.raises(ConfigError):
        resolve_pipeline("async", "cpu")
