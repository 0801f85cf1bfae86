"""The issue-34 backtest recipes: each is its recipe without the history features plus
``history_features = true``, and nothing else, so a backtest's lift between the two is theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranking.config.loader import Layer, file_values, resolve
from ranking.config.model import RecipeSection

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _recipe(name: str) -> RecipeSection:
    path = RECIPES / f"{name}.toml"
    return resolve([Layer(f"file:{path}", file_values(path))]).config.recipe


@pytest.mark.parametrize("name", ["naive", "default", "base-j", "base-fj"])
def test_a_history_recipe_is_its_recipe_with_the_history_features(name: str) -> None:
    without, with_history = _recipe(name), _recipe(f"{name}-history")
    assert not without.history_features and with_history.history_features
    assert with_history.model_copy(update={"history_features": False}) == without


def test_the_delayed_update_pair_differs_only_in_its_frozen_first_epoch() -> None:
    fj, j = _recipe("base-fj-history"), _recipe("base-j-history")
    assert (fj.schedule, j.schedule) == ("F,J", "joint") and j.epochs == 1
    same = {"schedule", "epochs"}
    assert {k: v for k, v in fj.model_dump().items() if k not in same} == {
        k: v for k, v in j.model_dump().items() if k not in same
    }
