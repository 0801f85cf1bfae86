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


def test_the_docs_config_blocks_are_the_models() -> None:
    """The config blocks of docs/backtest.md and docs/data.md are generated (`make schema`,
    infra/summaries_doc.py): fresh, every key with its default, the gate's comments its help."""
    from repo_scripts import load_script

    from ranking.config.model import SECTIONS
    from ranking.config.render import toml_value
    from ranking.core.summaries import GateThresholds

    tool = load_script("infra/summaries_doc.py")
    for path, sections in tool.CONFIG_DOCS.items():
        text = path.read_text()
        assert text == tool.with_config_block(text, sections), f"{path} is stale: run `make schema`"
    block = tool.config_block(tuple(SECTIONS))
    for section, model in SECTIONS.items():
        assert f"\n[{section}]" in block, section
        for name, info in model.model_fields.items():
            default = info.get_default(call_default_factory=True)
            if default is not None and not isinstance(default, dict):
                assert f"\n{name} = {toml_value(default)}" in block, (section, name)
    assert f"tolerance = 0.1             # {GateThresholds.model_fields['tolerance'].description}" in block
