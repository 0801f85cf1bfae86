"""The Feast store in the pipeline config (``[features]``: offline duckdb | spark, online sqlite |
redis, the Redis URL): validation (one line naming the key, exit 2), precedence (defaults < env
$RANKER_OFFLINE_STORE ... < file < --params) and that every step that applies, materializes or
builds a window gets the configured store — `features apply|materialize|window`, `study`,
`backtest` (`run` and `pretrain` through their in-process `features window` step). Fast: no
Feast apply, no Spark (tests/features/test_features_store_config.py applies for real)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from summary_examples import example_summaries

from features import feast_repo
from features.feast_repo import OFFLINE_STORES, ONLINE_STORES, StoreSettings
from ranking.cli.main import build_parser, main
from ranking.config import load
from ranking.config.model import PipelineConfig
from ranking.core.errors import RankerError
from ranking.core.summaries import StepSummary
from ranking.core.workspace import Workspace

STORE_ENV = ("RANKER_OFFLINE_STORE", "RANKER_ONLINE_STORE", "RANKER_REDIS_URL")
SPARK = '[features]\noffline_store = "spark"\n'


@pytest.fixture(autouse=True)
def _no_store_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in STORE_ENV:
        monkeypatch.delenv(var, raising=False)


def _home(tmp_path: Path, text: str | None = None) -> Path:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (home / "ranker.toml").write_text(text)
    return home


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_the_defaults_are_feast_repos_own() -> None:
    features = PipelineConfig().features
    assert features.store_settings() == StoreSettings() == feast_repo.store_settings()
    schema = features.model_json_schema()["properties"]
    assert tuple(schema["offline_store"]["enum"]) == OFFLINE_STORES == ("duckdb", "spark")
    assert tuple(schema["online_store"]["enum"]) == ONLINE_STORES


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[features]\noffline_store = "bigquery"\n',
            r"features\.offline_store: must be one of 'duckdb' or 'spark' \(got \"bigquery\"\) \[file:",
        ),
        ('[features]\noffline_store = "Spark"\n', r"features\.offline_store: must be one of"),
        ("[features]\noffline_store = 1\n", r"features\.offline_store: must be one of"),
        (
            '[features]\nonline_store = "cassandra"\n',
            r"features\.online_store: must be one of 'sqlite' or 'redis'",
        ),
        (
            '[features]\nredis_url = "localhost:6379; rm -rf /"\n',
            r"features\.redis_url: must be host:port\[,option=value\.\.\.\]",
        ),
        (
            '[features]\noffline = "spark"\n',
            r"features\.offline: unknown key \(known: offline_store, online_store",
        ),
        ('features = "spark"\n', r"features: must be a table of keys"),
    ],
)
def test_bad_store_values_are_one_line_errors_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    home = _home(tmp_path, text)
    steps = (
        ["config", "show"],
        ["features", "apply"],
        ["features", "materialize"],
        ["features", "window", "--end", "2026-01-10"],
        ["run", "--end", "2026-01-10"],
    )
    for argv in steps:
        assert main([*argv, "--home", str(home)]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        command = " ".join(w for w in argv[:2] if not w.startswith("-"))  # with its subcommand
        assert err.startswith(f"ranker {command}: error: config error: "), err
        assert re.search(message, err), err


def test_a_bad_environment_value_names_its_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKER_OFFLINE_STORE", "bigquery")
    assert main(["features", "apply", "--home", str(_home(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "ranker features apply: error: config error: features.offline_store: must be one of 'duckdb' or"
        " 'spark' (got \"bigquery\") [env:RANKER_OFFLINE_STORE]"
    )
    # the file wins over the environment: its valid value hides the bad one
    assert load(_home(tmp_path, SPARK)).config.features.offline_store == "spark"


def test_environment_below_file_below_params(tmp_path: Path) -> None:
    env = {
        "RANKER_OFFLINE_STORE": " Spark ",
        "RANKER_ONLINE_STORE": "REDIS",
        "RANKER_REDIS_URL": "redis://r:6380",
    }
    e = load(_home(tmp_path), environ=env)
    # the variables as feast_repo.store_settings() has always read them: trimmed, any case, redis://
    assert e.config.features.store_settings() == StoreSettings("spark", "redis", "r:6380")
    assert e.sources["features.offline_store"] == "env:RANKER_OFFLINE_STORE"
    assert e.sources["features.online_store"] == "env:RANKER_ONLINE_STORE"
    assert e.sources["features.redis_url"] == "env:RANKER_REDIS_URL"

    home = _home(tmp_path, '[features]\noffline_store = "duckdb"\nredis_url = "cache:6379"\n')
    e = load(home, environ=env)
    assert e.config.features.store_settings() == StoreSettings("duckdb", "redis", "cache:6379")
    assert e.sources["features.offline_store"] == f"file:{home / 'ranker.toml'}"
    assert e.sources["features.online_store"] == "env:RANKER_ONLINE_STORE"

    e = load(home, environ=env, params={"features.offline_store": "spark"})
    assert e.config.features.offline_store == "spark" and e.sources["features.offline_store"] == "param"

    # the same through a step's parser (the store has no flag: it is set once, for every step)
    args = _parse("features", "window", "--home", str(home), "--end", "2026-01-10",
                  "--params", '{"features.offline_store": "spark"}')  # fmt: skip
    assert args.pipeline_config.config.features.offline_store == "spark"
    assert args.pipeline_config.sources["features.offline_store"] == "param"
    args = _parse("features", "apply", "--home", str(home))
    assert args.pipeline_config.sources["features.offline_store"] == f"file:{home / 'ranker.toml'}"


def test_config_show_prints_the_store_and_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKER_ONLINE_STORE", "redis")
    home = _home(tmp_path, SPARK)
    assert main(["config", "show", "--home", str(home)]) == 0
    text = capsys.readouterr().out
    assert text.index("[features]") < text.index("[window]")
    assert f'offline_store = "spark"  # file:{home / "ranker.toml"}' in text
    assert 'online_store = "redis"  # env:RANKER_ONLINE_STORE' in text
    assert 'redis_url = "localhost:6379"  # default' in text


# ------------------------------------------------------------------ the steps get the store


def test_apply_renders_the_configured_offline_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ranker features apply` in a workspace whose ranker.toml names spark renders Feast's Spark
    offline store into <home>/feast/feature_store.yaml (Feast's own apply stubbed out: it is the
    same for every store, and tests/features/test_features_store_config.py runs it)."""
    got: list[StoreSettings | None] = []

    def fake_apply(ws: Workspace, settings: StoreSettings | None = None) -> feast_repo.ApplySummary:
        got.append(settings)
        path = feast_repo.write_store_config(ws, settings)  # what apply renders first
        assert settings is not None
        return feast_repo.ApplySummary(
            project="ranker",
            feature_store_yaml=str(path),
            offline_store=settings.offline_store,
            online_store=settings.online_store,
            entities=[],
            feature_views=[],
            feature_services=[],
            feature_version="x",
            duration_seconds=0.0,
        )

    monkeypatch.setattr(feast_repo, "apply", fake_apply)
    home = _home(tmp_path, SPARK)
    assert main(["features", "apply", "--home", str(home), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offline_store"] == "spark"
    assert got == [StoreSettings(offline_store="spark")]
    rendered = yaml.safe_load((home / "feast" / "feature_store.yaml").read_text())
    assert rendered["offline_store"]["type"] == "spark"
    assert rendered["offline_store"]["spark_conf"] == feast_repo.SPARK_LOCAL_CONF
    assert rendered["online_store"]["type"] == "sqlite"

    # without the file: the default store, duckdb (and the environment's, when it names one)
    (home / "ranker.toml").unlink()
    assert main(["features", "apply", "--home", str(home), "--json"]) == 0
    assert got[-1] == StoreSettings()
    assert yaml.safe_load((home / "feast" / "feature_store.yaml").read_text())["offline_store"] == {
        "type": feast_repo.DAY_RANGE_DUCKDB
    }
    monkeypatch.setenv("RANKER_OFFLINE_STORE", "spark")
    assert main(["features", "apply", "--home", str(home), "--json"]) == 0
    assert got[-1] == StoreSettings(offline_store="spark")
    capsys.readouterr()


def test_materialize_and_window_open_the_configured_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from features import window

    got: dict[str, Any] = {}

    def fake_materialize(ws: Workspace, end: dt.date | None = None, settings: Any = None) -> StepSummary:
        got["materialize"] = settings
        return example_summaries()["materialize"]

    def fake_build_window(
        ws: Workspace, end: dt.date, days: int = 20, checks: Any = None, settings: Any = None
    ) -> dict[str, Any]:
        got["window"] = (days, checks.min_coverage, settings)
        example = example_summaries()["window"].model_dump(mode="json")  # every field valid
        return {k: example[k] for k in window.WINDOW_SUMMARY_FIELDS} | {"end": end.isoformat(), "days": days}

    monkeypatch.setattr(feast_repo, "materialize", fake_materialize)
    monkeypatch.setattr(window, "build_window", fake_build_window)
    home = _home(tmp_path, SPARK + "[window]\ndays = 3\nmin_coverage = 0.5\n")
    assert main(["features", "materialize", "--home", str(home), "--json"]) == 0
    assert main(["features", "window", "--home", str(home), "--end", "2026-01-10", "--json"]) == 0
    capsys.readouterr()
    spark = StoreSettings(offline_store="spark")
    assert got == {"materialize": spark, "window": (3, 0.5, spark)}


def test_study_builds_its_windows_on_the_configured_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from features import window

    class Stop(RankerError):
        pass

    got: list[Any] = []

    def fake_build_window(
        ws: Workspace, end: dt.date, days: int = 20, checks: Any = None, settings: Any = None
    ) -> Any:
        got.append(settings)
        raise Stop("stop here")

    monkeypatch.setattr(window, "build_window", fake_build_window)
    home = _home(tmp_path, SPARK)
    argv = ["study", "--home", str(home), "--end", "2026-01-10",
            "--windows", "3", "--epochs", "1", "--seeds", "1"]  # fmt: skip
    assert main(argv) == 2
    assert "stop here" in capsys.readouterr().err
    assert got == [StoreSettings(offline_store="spark")]


def test_backtest_builds_its_windows_on_the_workspace_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from features import window
    from ranking.backtest import engine

    class Stop(RankerError):
        pass

    captured: dict[str, Any] = {}

    class FakeBacktest:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            captured.update(kwargs)
            raise Stop("stop here")

    monkeypatch.setattr(engine, "Backtest", FakeBacktest)
    home = _home(tmp_path, SPARK)
    recipe = tmp_path / "r.toml"
    recipe.write_text("[recipe]\nepochs = 1\n")
    argv = ["backtest", "--home", str(home), "--start", "2026-01-10",
            "--days", "1", "--recipe", f"r={recipe}"]  # fmt: skip
    assert main(argv) == 2
    capsys.readouterr()
    built: list[Any] = []
    monkeypatch.setattr(
        window, "build_window", lambda ws, end, days, checks, settings: built.append(settings)
    )
    captured["window_builder"](Workspace.resolve(home), dt.date(2026, 1, 10), 3, None)
    assert built == [StoreSettings(offline_store="spark")]


def test_a_backtest_recipe_may_not_choose_the_store(tmp_path: Path) -> None:
    """The recipes share the workspace's feast/ and windows/: the store is the workspace's."""
    from ranking.backtest.spec import BacktestError, config_digest, read_recipe, recipe_config

    path = tmp_path / "r.toml"
    path.write_text('[recipe]\nepochs = 1\n[features]\noffline_store = "spark"\n')
    with pytest.raises(
        BacktestError, match=r"recipe r: features\.offline_store: the Feast store is the backtested"
    ):
        recipe_config(read_recipe("r", path), {}, None)
    # the workspace's config may: its recipes' homes get it (and their day fingerprints ignore it)
    path.write_text("[recipe]\nepochs = 1\n")
    plain = recipe_config(read_recipe("r", path), {}, None)
    spark = recipe_config(read_recipe("r", path), {"features.offline_store": "spark"}, "file:ws.toml")
    assert (
        spark.config.features.offline_store == "spark"
        and spark.sources["features.offline_store"] == "file:ws.toml"
    )
    assert config_digest(spark) == config_digest(plain)
