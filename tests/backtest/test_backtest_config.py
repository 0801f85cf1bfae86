"""The bootstrap of `ranker backtest` and `ranker review` is the config's `[backtest]` section
(issue 33): written once there; the flags bind to it, the review plan reads it, and neither
`BacktestSpec` nor the statistics keep a default of their own."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import inspect
from pathlib import Path

import pytest

from ranking.backtest.spec import BacktestSpec, config_digest, read_recipe, recipe_config
from ranking.backtest.stats import compare, compare_slices
from ranking.cli.main import UsageError, build_parser
from ranking.config.model import BacktestSection, PipelineConfig, ReviewSection
from ranking.review.run import plan_review

BOOTSTRAP = ("bootstrap_samples", "ci_level", "seed")


def _parse(home: Path, *flags: str) -> argparse.Namespace:
    argv = ["backtest", "--home", str(home), "--start", "2026-01-06", "--days", "2", "--recipe", "naive"]
    return build_parser().parse_args([*argv, *flags])


def test_the_shipped_bootstrap_is_unchanged() -> None:
    """1,000 resamples, a 95 % CI, seed 0: what `ranker backtest` and the review used before the
    section existed (their reports stay the same); the review's resamples are [backtest]'s."""
    config = PipelineConfig()
    assert (config.backtest.bootstrap_samples, config.backtest.ci_level, config.backtest.seed) == (
        1000,
        0.95,
        0,
    )
    assert config.review.bootstrap_samples is None


def test_the_flags_take_the_config_and_a_given_flag_wins(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    args = _parse(home)
    assert (args.bootstrap_samples, args.ci_level, args.seed) == (1000, 0.95, 0)
    (home / "ranker.toml").write_text("[backtest]\nbootstrap_samples = 200\nci_level = 0.9\nseed = 7\n")
    args = _parse(home)
    assert (args.bootstrap_samples, args.ci_level, args.seed) == (200, 0.9, 7)
    assert args.pipeline_config.sources["backtest.seed"] == f"file:{home / 'ranker.toml'}"
    args = _parse(home, "--ci-level", "0.8", "--seed", "3")
    assert (args.bootstrap_samples, args.ci_level, args.seed) == (200, 0.8, 3)
    assert args.pipeline_config.sources["backtest.ci_level"] == "flag"


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--bootstrap-samples", "9"), ("--ci-level", "0.5"), ("--ci-level", "1"), ("--seed", str(2**32))],
)
def test_the_flags_keep_the_configs_bounds(tmp_path: Path, flag: str, value: str) -> None:
    with pytest.raises(UsageError, match=f"argument {flag}: must be"):
        _parse(tmp_path / "home", flag, value)


def test_the_review_takes_the_ci_level_and_seed_from_backtest_and_its_own_samples_if_set() -> None:
    end = dt.date(2026, 3, 14)
    bootstrap = BacktestSection(bootstrap_samples=300, ci_level=0.9, seed=5)
    spec = plan_review(ReviewSection(), end, bootstrap).spec()
    assert (spec.bootstrap_samples, spec.ci_level, spec.seed) == (300, 0.9, 5)
    spec = plan_review(ReviewSection(bootstrap_samples=40), end, bootstrap).spec()
    assert (spec.bootstrap_samples, spec.ci_level, spec.seed) == (40, 0.9, 5)
    shipped = PipelineConfig()
    spec = plan_review(shipped.review, end, shipped.backtest).spec()
    assert (spec.bootstrap_samples, spec.ci_level, spec.seed) == (1000, 0.95, 0)


def test_a_days_fingerprint_ignores_the_bootstrap(tmp_path: Path) -> None:
    """How recipes are compared is not how a day trains: a new CI level reuses every recorded day."""
    path = tmp_path / "r.toml"
    path.write_text("[recipe]\nepochs = 1\n")
    recipe = read_recipe("r", path)
    plain = recipe_config(recipe, {}, None)
    other = recipe_config(recipe, {"backtest.ci_level": 0.8, "backtest.seed": 9}, "file:ws.toml")
    assert other.config.backtest.ci_level == 0.8
    assert config_digest(other) == config_digest(plain)


def test_the_spec_and_the_statistics_have_no_defaults_of_their_own() -> None:
    fields = {f.name: f for f in dataclasses.fields(BacktestSpec)}
    for name in BOOTSTRAP:
        assert fields[name].default is dataclasses.MISSING, name
    for function in (compare, compare_slices):
        params = inspect.signature(function).parameters
        for name in ("samples", "level", "seed"):
            assert params[name].default is inspect.Parameter.empty, (function.__name__, name)
