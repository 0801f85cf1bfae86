"""The pipeline config: precedence (defaults < env < file < flags / Params) with each value's
source, validation errors (one line naming the key, exit 2), discovery, `ranker config show`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path

import pytest

from features.build_checks import WindowChecks
from ranking.cli.config import bindings
from ranking.cli.main import build_parser, main
from ranking.config import ConfigFileError, Layer, load, resolve
from ranking.config.model import PipelineConfig
from ranking.gate.checks import GateConfig


def _home(tmp_path: Path, text: str | None = None, name: str = "ranker.toml") -> Path:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (home / name).write_text(text)
    return home


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_defaults_are_the_steps_own_defaults() -> None:
    from features.window import DEFAULT_DAYS

    config = PipelineConfig()
    assert config.window.checks() == WindowChecks()
    assert config.gate.gate_config() == GateConfig()
    assert config.window.days == DEFAULT_DAYS  # build_window's, the one definition in features.build_checks


def _step_parsers() -> dict[str, argparse.ArgumentParser]:
    subparsers = {}

    def walk(p: argparse.ArgumentParser) -> None:
        step = p._defaults.get("step")
        if step:
            subparsers[step] = p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)

    walk(build_parser())
    return subparsers


def test_every_bound_flag_has_the_config_default_as_its_own(tmp_path: Path) -> None:
    """`--help` must not claim a default the config then overrides: a bound flag's argparse default
    equals the config default (None for flags whose default is computed later)."""
    subparsers = _step_parsers()
    defaults = load(tmp_path)
    for step, table in bindings().items():
        actions = {a.dest: a for a in subparsers[step]._actions}
        for b in table:
            argparse_default = actions[b.dest].default
            value = defaults.value(b.key)
            if argparse_default is None:
                continue
            assert argparse_default == value, (step, b.dest, argparse_default, value)


def test_help_shows_each_bound_flags_config_key_and_default(tmp_path: Path) -> None:
    """A bound flag's help names its key and the config's default (the flag's own argparse default
    is never used); a flag whose key has a default does not state one of its own beside it."""
    subparsers = _step_parsers()
    defaults = load(tmp_path)
    for step, table in bindings().items():
        parser = subparsers[step]
        text = " ".join(parser.format_help().split())
        own_help = {a.dest: a.help or "" for a in parser._actions}
        for b in table:
            value = defaults.value(b.key)
            if value is None:
                assert f"[config {b.key}]" in text, (step, b.dest)
                continue
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            assert f"[config {b.key}, default {shown}]" in text, (step, b.dest)
            assert "default" not in own_help[b.dest], (step, b.dest, own_help[b.dest])


def test_the_train_job_has_no_defaults_of_the_configs_own() -> None:
    """Every default of a train request is written once, in the config (issue 33: `TrainJob` held
    its own copies, kept equal by a drift test): what [recipe] and [window] decide has none."""
    from ranking.trainer.job import TrainJob

    fields = {f.name: f for f in dataclasses.fields(TrainJob)}
    decided = (set(fields) & set(type(PipelineConfig().recipe).model_fields)) | {"days"}
    assert {"warm_start", "schedule", "epochs", "remedy", "seed", "batch_size", "days"} <= decided
    for name in sorted(decided):
        field = fields[name]
        assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, name


def test_file_below_params_below_flags(tmp_path: Path) -> None:
    home = _home(tmp_path, '[recipe]\nepochs = 1\nwarm_start = "none"\n[window]\ndays = 7\n')
    common = ["train", "--home", str(home), "--end", "2026-01-10"]
    args = _parse(*common)
    assert (args.epochs, args.warm_start, args.days, args.schedule) == (1, "none", 7, "delayed")
    src = args.pipeline_config.sources
    assert src["recipe.epochs"] == f"file:{home / 'ranker.toml'}" and src["recipe.schedule"] == "default"

    args = _parse(*common, "--epochs", "2", "--days", "7")
    assert (args.epochs, args.warm_start) == (2, "none")
    assert args.pipeline_config.sources["recipe.epochs"] == "flag"
    assert args.pipeline_config.sources["window.days"] == "flag"  # given, even though equal to the file's

    # how the DAG runs a step: its Params as --params, above the file
    args = _parse(*common, "--params", '{"recipe.epochs": 3, "recipe.schedule": null}')
    assert (args.epochs, args.schedule) == (3, "delayed")  # null: not set by the Params
    assert args.pipeline_config.sources["recipe.epochs"] == "param"
    assert args.pipeline_config.sources["recipe.warm_start"].startswith("file:")
    # file < flags < Params: a run's Param is the operator's choice, over a flag the caller wired
    args = _parse(*common, "--params", '{"recipe.epochs": 3}', "--epochs", "2", "--seed", "4")
    assert (args.epochs, args.seed) == (3, 4)
    assert args.pipeline_config.sources["recipe.epochs"] == "param"
    assert args.pipeline_config.sources["recipe.seed"] == "flag"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ('{"recipe.epochs": 0}', r"recipe\.epochs: must be >= 1 \(got 0\) \[param\]"),
        ('{"gate.tolerance": NaN}', r"gate\.tolerance: must be a finite number \(got nan\) \[param\]"),
        ('{"recipes.epochs": 1}', r"recipes\.epochs: unknown section"),
        ('{"recipe.epoch": 1}', r"recipe\.epoch: unknown key"),
        ("[1]", r"--params: must be a JSON object"),
        ("{", r"--params: not a JSON object"),
    ],
)
def test_bad_params_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], params: str, message: str
) -> None:
    assert main(["train", "--home", str(_home(tmp_path)), "--end", "2026-01-10", "--params", params]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err


def test_gate_thresholds_come_from_the_file_unless_flagged(tmp_path: Path) -> None:
    home = _home(tmp_path, '[gate]\ntolerance = 0.03\nrule = "point"\nmax_ne_rise = 0.05\n')
    args = _parse("gate", "--home", str(home), "--candidate", "v0001", "--max-ne-rise", "0.02")
    assert (args.tolerance, args.gate_rule, args.max_ne_rise, args.max_auc_drop) == (
        0.03,
        "point",
        0.02,
        0.02,
    )


def test_environment_sits_between_defaults_and_the_file(tmp_path: Path) -> None:
    env = {"RANKER_PUSHGATEWAY_URL": "http://gw:9091", "RANKER_MAX_SOURCE_LAG_HOURS": "30"}
    e = load(_home(tmp_path), environ=env)
    assert e.config.metrics.pushgateway == "http://gw:9091"
    assert e.sources["metrics.pushgateway"] == "env:RANKER_PUSHGATEWAY_URL"
    assert e.config.window.max_source_lag_hours == 30.0
    e = load(_home(tmp_path, '[metrics]\npushgateway = ""\n'), environ=env)
    assert e.config.metrics.pushgateway == "" and e.sources["metrics.pushgateway"].startswith("file:")


def test_an_explicit_schedule_list_carries_its_own_epochs() -> None:
    e = resolve([Layer("file:x", {"recipe.epochs": 3}), Layer("flag", {"recipe.schedule": "F,J"})])
    assert e.config.recipe.epochs == 2 and e.config.recipe.epoch_count == 2
    with pytest.raises(ConfigFileError, match=r"recipe\.epochs: must equal the length of schedule F,J"):
        resolve([Layer("file:x", {"recipe.schedule": "F,J", "recipe.epochs": 3})])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[recipe]\nepochs = 0\n", r"recipe\.epochs: must be >= 1 \(got 0\)"),
        ("[recipe]\nepoch = 1\n", r"recipe\.epoch: unknown key \(known: schedule, epochs"),
        ("[recipes]\nepochs = 1\n", r"recipes: unknown section"),
        ('[recipe]\nepochs = "3"\n', r"recipe\.epochs: must be an integer \(got \"3\"\)"),
        ("[gate]\ntolerance = nan\n", r"gate\.tolerance: must be a finite number \(got nan\)"),
        ("[gate]\nmax_auc_drop = inf\n", r"gate\.max_auc_drop: must be a finite number \(got inf\)"),
        ("[gate]\ntolerance = 1.0\n", r"gate\.tolerance: must be < 1"),
        ('[recipe]\nschedule = "F,X"\n', r"recipe\.schedule: must be one of delayed"),
        (
            '[recipe]\nwarm_start_scope = "tables"\n',
            r"recipe\.warm_start_scope: must be one of 'all' or 'dense'",
        ),
        (
            "[validation]\nmin_label_rate = 0.7\nmax_label_rate = 0.5\n",
            r"validation\.max_label_rate: must be >= min_label_rate \(0\.7\)",
        ),
        ("[validation]\nmax_null_rate = -0.1\n", r"validation\.max_null_rate: must be >= 0"),
        ("[window]\nmax_null_rate = 0.9\n", r"max_null_rate moved to the \[validation\] section"),
        ('[validation.policy]\ndrift = "ignore"\n', r"validation\.policy\.drift"),
        ('[validation.policy]\nnot_a_kind = "warn"\n', r"unknown anomaly kind\(s\) \['not_a_kind'\]"),
        (
            '[recipe.table_optimizer]\nname = "sgd"\nlr = 0.1\n',
            r"recipe\.table_optimizer\.name: must be one of",
        ),
        ('[metrics]\ntextfile = "out.txt"\n', r"metrics\.textfile: must be a path ending in \.prom"),
        ("[gate]\nallow_unfair = 1\n", r"gate\.allow_unfair: must be true or false"),
        ("window = 3\n", r"window: must be a table of keys"),
        ("[recipe\n", r"not valid TOML"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    home = _home(tmp_path, text)
    for argv in (["config", "show"], ["train", "--end", "2026-01-10"], ["gate", "--candidate", "v0001"]):
        assert main([*argv, "--home", str(home)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        command = " ".join(w for w in argv[:2] if not w.startswith("-"))  # with its subcommand
        assert err.startswith(f"ranker {command}: error: config error: "), err  # the one error format
        assert re.search(message, err), err


def test_yaml_is_read_too_and_its_nan_refused(tmp_path: Path) -> None:
    home = _home(tmp_path, "recipe:\n  epochs: 2\n", name="ranker.yaml")
    assert load(home).config.recipe.epochs == 2
    (home / "ranker.yaml").write_text("gate:\n  tolerance: .nan\n")
    with pytest.raises(ConfigFileError, match=r"gate\.tolerance: must be a finite number"):
        load(home)
    (home / "ranker.toml").write_text("")
    with pytest.raises(ConfigFileError, match="holds 2 config files"):
        load(home)


def test_discovery_flag_then_env_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path, "[recipe]\nepochs = 1\n")
    other = tmp_path / "other.toml"
    other.write_text("[recipe]\nepochs = 2\n")
    envfile = tmp_path / "env.toml"
    envfile.write_text("[recipe]\nepochs = 4\n")
    assert _parse("train", "--home", str(home), "--end", "2026-01-10").epochs == 1
    monkeypatch.setenv("RANKER_CONFIG", str(envfile))
    assert _parse("train", "--home", str(home), "--end", "2026-01-10").epochs == 4
    args = _parse("train", "--home", str(home), "--end", "2026-01-10", "--config", str(other))
    assert args.epochs == 2 and args.pipeline_config.files == (str(other.resolve()),)
    with pytest.raises(ConfigFileError, match="--config: no config file at"):
        _parse("train", "--home", str(home), "--end", "2026-01-10", "--config", str(tmp_path / "nope.toml"))


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    home = _home(tmp_path, '[recipe]\nmodel_file = "models/m.json"\nwarm_start = "none"\n')
    args = _parse("train", "--home", str(home), "--end", "2026-01-10")
    assert args.model_config == home / "models" / "m.json"
    assert args.warm_start == "none"


def test_config_show_prints_values_and_sources_and_its_text_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(
        tmp_path, '[recipe]\nepochs = 1\n[recipe.table_optimizer]\nname = "rowwise_adam"\nlr = 0.01\n'
    )
    assert main(["config", "show", "--home", str(home), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["config"]["recipe"]["epochs"] == 1
    assert shown["sources"]["recipe.epochs"] == f"file:{home / 'ranker.toml'}"
    assert shown["sources"]["gate.tolerance"] == "default"
    assert main(["config", "show", "--home", str(home)]) == 0
    text = capsys.readouterr().out
    assert f"epochs = 1  # file:{home / 'ranker.toml'}" in text
    again = _home(tmp_path / "again", text)
    assert load(again).config == load(home).config


def test_the_dags_param_keys_are_config_keys() -> None:
    """The DAG maps its Params to config keys without importing ranking: check the names here."""
    import importlib.util
    import sys

    from ranking.config import leaf_keys

    dags = Path(__file__).resolve().parents[2] / "dags"
    if str(dags) not in sys.path:  # params.py imports the package's pure JSON types, no Airflow
        sys.path.append(str(dags))
    spec = importlib.util.spec_from_file_location("dag_params", dags / "ranker_dags" / "params.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["dag_params"] = module  # dataclasses resolve the module's annotations through it
    spec.loader.exec_module(module)
    assert set(module.PARAM_KEYS.values()) <= set(leaf_keys())
    # and every value the Params' enums allow is a valid config value of its key
    for warm in module.WARM_STARTS:
        for scope in module.WARM_START_SCOPES:
            e = resolve([Layer("param", {"recipe.warm_start": warm, "recipe.warm_start_scope": scope})])
            assert (e.config.recipe.warm_start, e.config.recipe.warm_start_scope) == (warm, scope)
    for pipeline in module.PIPELINES:
        assert resolve([Layer("param", {"recipe.pipeline": pipeline})]).config.recipe.pipeline == pipeline
    for schedule in module.SCHEDULE_NAMES:
        assert resolve([Layer("param", {"recipe.schedule": schedule})]).config.recipe.schedule == schedule
