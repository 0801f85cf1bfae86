"""The DAGs' copy of the config's bounds (dags/ranker_dags/config_bounds.json, read by the Params
of the Airflow environment, which cannot import ranking) is what the config model says."""

from __future__ import annotations

import json

from ranking.config.bounds import BOUNDS_FILE, config_bounds, main
from ranking.config.model import PipelineConfig


def test_the_committed_bounds_are_the_models() -> None:
    assert json.loads(BOUNDS_FILE.read_text()) == config_bounds(), "stale: run `make schema`"
    assert main(["--check"]) == 0


def test_every_key_of_every_section_is_there_with_its_limits() -> None:
    bounds = config_bounds()
    keys = {
        f"{s}.{f}"
        for s, section in PipelineConfig.model_fields.items()
        for f in section.annotation.model_fields
    }  # type: ignore[union-attr]
    assert set(bounds) == keys
    config = PipelineConfig()
    for key, bound in bounds.items():
        section, name = key.split(".")
        assert "title" not in bound and "anyOf" not in bound, key
        assert bound.get("default") == getattr(getattr(config, section), name) or "default" not in bound, key
    # an optional int (anyOf [int, null]) keeps its limits; an exclusive limit stays exclusive
    assert {"type", "minimum", "maximum"} <= set(bounds["recipe.epochs"])
    assert "exclusiveMaximum" in bounds["gate.tolerance"] and "maximum" not in bounds["gate.tolerance"]
