"""The weekly base does not inherit the daily recipe (issue 22.3): with every recipe key set away
from its default in the config, `ranker pretrain`'s train step still asks for a model from
scratch, with the [pretrain] section's schedule, epochs and seed, and no remedy or lineage; only
the keys the base must share with the daily model (architecture, optimizers, batches) carry over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ranking.cli.main import main
from ranking.config import load
from ranking.config.model import RecipeSection
from ranking.core.results import CommandResult
from ranking.core.summaries import TrainSummary, WindowSummary
from ranking.pipeline import steps
from ranking.pipeline.pretrain import BASE_INHERITS, BASE_OWN

# a daily recipe with every key away from its default; warm_start_scope = dense and a carried
# optimizer exclude each other, so the two recipes below between them move every key
_DAILY: dict[str, Any] = {
    "schedule": "frozen",
    "epochs": 3,
    "warm_start": "champion",
    "incremental": True,
    "full_retrain_every_days": 5,
    "full_retrain_warm_start": "none",
    "pipeline": "sync",
    "remedy": "meda",
    "batch_size": 256,
    "seed": 9,
    "model_file": "model.json",
    "history_features": True,
}
_TABLES = (
    '[recipe.table_optimizer]\nname = "rowwise_adagrad"\nlr = 0.3\n'
    '[recipe.dense_optimizer]\nname = "adam"\nlr = 0.004\n'
    "[pretrain]\nseed = 4\n"
)
RECIPES: dict[str, dict[str, Any]] = {
    "dense-scope": {"warm_start_scope": "dense"},
    "carried-optimizer": {"warm_start_optimizer": True},
}


def _home(tmp_path: Path, name: str) -> Path:
    home = tmp_path / name
    home.mkdir()
    (home / "model.json").write_text("{}")
    recipe = {**_DAILY, **RECIPES[name]}
    lines = ["[recipe]", *(f"{key} = {json.dumps(value)}" for key, value in recipe.items())]
    (home / "ranker.toml").write_text("\n".join(lines) + "\n" + _TABLES)
    return home


def test_the_recipes_move_every_key(tmp_path: Path) -> None:
    default = RecipeSection()
    moved: set[str] = set()
    for name in RECIPES:
        daily = load(_home(tmp_path, name)).config.recipe
        moved |= {k for k in RecipeSection.model_fields if getattr(daily, k) != getattr(default, k)}
    assert moved == set(RecipeSection.model_fields)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Stand-ins for the window and train handlers recording the train step's request (training
    itself is other tests'); the base's registration then fails, which ends the pretrain."""
    seen: dict[str, Any] = {}

    def window(request: Any) -> CommandResult:
        seen["window_days"] = request.days
        return CommandResult(WindowSummary.model_construct(days=request.days, window_id="w"))

    def training(job: Any) -> CommandResult:
        seen["job"] = job
        seen["recipe"] = RecipeSection(**job.effective_config["config"]["recipe"])
        return CommandResult(TrainSummary.model_construct(version="v0001", run_dir="unused", eval=None))

    monkeypatch.setattr(steps, "window", window)
    monkeypatch.setattr(steps, "train", training)
    return seen


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_the_base_trains_from_scratch_whatever_the_daily_recipe(
    seen: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    home = _home(tmp_path, name)
    daily = load(home).config.recipe
    main(["pretrain", "--home", str(home), "--end", "2026-03-01", "--json"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["failed_step"] == "pretrain", summary  # registering the stand-in version
    job, base = seen["job"], seen["recipe"]
    assert (job.warm_start, job.warm_start_scope, job.warm_start_optimizer) == ("none", "all", False)
    assert (job.incremental, job.remedy) == (False, "none")
    assert (job.schedule, job.epochs, job.seed) == ("joint", 1, 4)  # [pretrain]'s
    assert seen["window_days"] == job.days == 20 and str(job.end) == "2026-02-09"  # before the window
    neutral = RecipeSection(warm_start="none")
    for key in RecipeSection.model_fields:
        if key in BASE_INHERITS:
            assert getattr(base, key) == getattr(daily, key), key
        elif key not in BASE_OWN:
            assert getattr(base, key) == getattr(neutral, key), key
    # what the base shares with the daily model: its architecture, optimizers and batches
    assert job.batch_size == 256 and job.pipeline == "sync" and job.model_config == home / "model.json"
    assert job.history_features  # the daily model's dense features: a warm start from the base loads
    assert job.table_optimizer is not None and job.table_optimizer.lr == 0.3


def test_every_recipe_key_is_reset_or_named_as_the_bases_own_or_shared() -> None:
    """A new recipe key is reset to its default for the base unless it is named on purpose."""
    named = [*BASE_INHERITS, *BASE_OWN]
    assert len(named) == len(set(named)) and set(named) < set(RecipeSection.model_fields)
