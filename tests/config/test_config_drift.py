"""The config model, the steps' own settings and the flags cannot drift apart (issue 22): every
gate key is one model's (`GateThresholds`: the section, `GateConfig` and the verdict's record) and a
`ranker gate` flag (or is named config-only), and every recipe key is a `ranker train` flag (or is named config-only)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from ranking.cli.config import RECIPE_CONFIG_ONLY, bindings
from ranking.cli.main import build_parser
from ranking.cli.options import GATE_CONFIG_ONLY, GATE_FLAGS, GATE_OPTIONS
from ranking.config.model import GateSection, RecipeSection
from ranking.core.summaries import GateSummary, GateThresholds
from ranking.gate.checks import GateConfig


def _step_parser(step: str) -> argparse.ArgumentParser:
    found: list[argparse.ArgumentParser] = []

    def walk(p: argparse.ArgumentParser) -> None:
        if p._defaults.get("step") == step:
            found.append(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)

    walk(build_parser())
    assert len(found) == 1, step
    return found[0]


def mirror_problems(
    fields: Iterable[str], keys: Iterable[str], flagged: Iterable[str], config_only: Iterable[str]
) -> list[str]:
    """What is missing or doubled between a step's settings, its config keys and its flags."""
    fields, keys, flagged, config_only = set(fields), set(keys), list(flagged), set(config_only)
    problems = [f"{name}: no config key" for name in sorted(fields - keys)]
    problems += [f"{name}: a config key the step does not have" for name in sorted(keys - fields)]
    problems += [
        f"{name}: neither a flag nor config-only" for name in sorted(keys - set(flagged) - config_only)
    ]
    problems += [f"{name}: a flag and config-only" for name in sorted(set(flagged) & config_only)]
    problems += [f"{name}: flagged twice" for name in sorted({n for n in flagged if flagged.count(n) > 1})]
    problems += [
        f"{name}: flag or config-only name of no key" for name in sorted((set(flagged) | config_only) - keys)
    ]
    return problems


def _gate_flagged() -> list[str]:
    return [name for _, name, _, _ in GATE_OPTIONS] + [name for _, name, _ in GATE_FLAGS]


def test_gate_section_gate_config_and_gate_flags_hold_the_same_fields() -> None:
    assert (
        mirror_problems(GateConfig.model_fields, GateSection.model_fields, _gate_flagged(), GATE_CONFIG_ONLY)
        == []
    )
    # one model holds the gate's defaults and limits: the section, the gate's config and the verdict's record
    assert issubclass(GateSection, GateThresholds) and issubclass(GateConfig, GateThresholds)
    assert GateSummary.model_fields["config"].annotation is GateThresholds
    assert GateSection().model_dump() == GateConfig().model_dump() == GateThresholds().model_dump()
    for option, name, _, text in GATE_OPTIONS:
        assert text == (GateThresholds.model_fields[name].description or "").replace("%", "%%"), option


def test_the_drift_check_finds_a_field_without_a_key_or_a_flag() -> None:
    fields = [*GateConfig.model_fields, "min_new_check"]
    assert mirror_problems(fields, GateSection.model_fields, _gate_flagged(), GATE_CONFIG_ONLY) == [
        "min_new_check: no config key"
    ]
    keys = [*GateSection.model_fields, "min_new_check"]
    assert mirror_problems(fields, keys, _gate_flagged(), GATE_CONFIG_ONLY) == [
        "min_new_check: neither a flag nor config-only"
    ]
    assert mirror_problems(fields, keys, [*_gate_flagged(), "min_new_check"], GATE_CONFIG_ONLY) == []


def test_every_recipe_key_is_a_train_flag_or_config_only() -> None:
    train = {b.key: b.dest for b in bindings()["train"]}
    recipe_flagged = [key.split(".", 1)[1] for key in train if key.startswith("recipe.")]
    fields = RecipeSection.model_fields
    assert mirror_problems(fields, fields, recipe_flagged, RECIPE_CONFIG_ONLY) == []


def test_every_bound_dest_is_a_flag_of_its_step() -> None:
    """A binding whose flag is missing would fill an attribute no option sets: the key could never
    be given on the command line, silently."""
    for step, table in bindings().items():
        if not table:
            continue
        dests = {a.dest for a in _step_parser(step)._actions if a.option_strings}
        missing = [b.dest for b in table if b.dest not in dests]
        assert missing == [], (step, missing)
    gate_run = {a.dest for a in _step_parser("run")._actions}
    assert {b.dest for b in bindings()["gate"]} <= gate_run  # ranker run hands them to its gate


def test_no_bound_flag_writes_a_default_of_its_own() -> None:
    """A bound flag takes its key's effective value when not given: a default of its own would be
    a second default, shown nowhere and used never (until someone parses without the config)."""
    for step, table in bindings().items():
        actions = {a.dest: a for a in _step_parser(step)._actions if a.option_strings}
        own = {b.dest: actions[b.dest].default for b in table if actions[b.dest].default not in (None, False)}
        assert own == {}, (step, own)


def test_flag_choices_come_from_the_config_models_constants() -> None:
    """Where a config key has a fixed set of values, its flag offers exactly that set."""
    from typing import get_args

    from ranking.config.model import PipelineConfig

    compared = set()
    for step, table in bindings().items():
        actions = {a.dest: a for a in _step_parser(step)._actions if a.option_strings}
        for b in table:
            section, name = b.key.split(".")
            annotation = type(getattr(PipelineConfig(), section)).model_fields[name].annotation
            allowed = get_args(annotation) if getattr(annotation, "__origin__", None) is not None else ()
            choices = actions[b.dest].choices
            if choices is not None and allowed and all(isinstance(v, str) for v in allowed):
                assert tuple(choices) == tuple(allowed), (step, b.dest, choices, allowed)
                compared.add(b.key)
    assert {"recipe.pipeline", "recipe.remedy", "recipe.warm_start_scope"} <= compared
