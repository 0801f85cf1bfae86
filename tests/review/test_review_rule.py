"""The recommendation rule and the switch decision (pure), and the config layer that makes the
daily run follow a review (review.recipe = "auto")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranking.config.loader import ConfigFileError, load
from ranking.review.rule import (
    Evidence,
    ReviewError,
    days_to_detect,
    decide,
    minimum_detectable_effect,
    recommend,
)
from ranking.review.switch import FAILED, OK, TOO_FEW_DAYS, AutoState, decide_switch


def ev(name: str, lift: float, lo: float, hi: float, seconds: float) -> Evidence:
    return Evidence(name, lift, (lo, hi), seconds, days=14)


NAIVE = ev("naive", 0.0, 0.0, 0.0, 40)


def test_a_significant_gain_recommends_the_best_when_nothing_cheaper_reaches_it() -> None:
    got = recommend([NAIVE, ev("default", 0.144, 0.108, 0.182, 96), ev("base-j", 0.05, 0.02, 0.09, 91)])
    assert (got.recipe, got.best) == ("default", "default")


def test_the_cheapest_recipe_not_below_the_best_lower_bound_wins() -> None:
    # base-j's CI reaches default's lower bound and it trains faster: same evidence, less cost
    got = recommend([NAIVE, ev("default", 0.144, 0.108, 0.182, 96), ev("base-j", 0.12, 0.08, 0.15, 91)])
    assert (got.recipe, got.best) == ("base-j", "default")
    assert got.eligible == ("base-j", "default")


def test_no_significant_gain_recommends_the_cheapest() -> None:
    # the real log: default -0.30% [-1.53%, +0.91%], base-j -0.14% [-1.17%, +0.87%]
    got = recommend(
        [NAIVE, ev("default", -0.0030, -0.0153, 0.0091, 96), ev("base-j", -0.0014, -0.0117, 0.0087, 91)]
    )
    assert got.recipe == "naive"
    assert "no significant gain" in got.reason
    # a positive but unresolved gain is not a significant one either
    assert recommend([NAIVE, ev("default", 0.02, -0.001, 0.04, 96)]).recipe == "naive"


def test_no_significant_gain_keeps_the_baseline_whatever_the_clock_said() -> None:
    # two reviews on a shared machine measured naive slower than the recipes that pretrain: an
    # ordering by seconds followed the load, not the recipes
    evidence = [
        ev("naive", 0.0, 0.0, 0.0, 16.6),
        ev("default", 0.004, -0.01, 0.02, 15.1),
        ev("base-j", -0.002, -0.012, 0.008, 16.0),
    ]
    assert recommend(evidence).recipe == "default"  # without a baseline: the cheapest by the clock
    got = recommend(evidence, baseline="naive")
    assert got.recipe == "naive" and "keep the baseline, naive" in got.reason
    # a significant gain is still followed
    assert (
        recommend([*evidence[:1], ev("default", 0.05, 0.02, 0.08, 15.1)], baseline="naive").recipe
        == "default"
    )


def test_a_recipe_significantly_below_the_best_is_never_recommended_even_if_cheapest() -> None:
    got = recommend(
        [
            ev("naive", 0.0, 0.0, 0.0, 40),
            ev("cheap", -0.2, -0.3, -0.1, 10),
            ev("default", 0.1, 0.05, 0.15, 96),
        ]
    )
    assert got.recipe == "default" and "cheap" not in got.eligible


def test_cost_weight_lets_a_cheaper_recipe_be_the_best() -> None:
    evidence = [NAIVE, ev("default", 0.10, 0.06, 0.14, 120), ev("base-j", 0.04, 0.03, 0.05, 60)]
    assert recommend(evidence).recipe == "default"
    # per extra multiple of naive's training time: at 1% default pays 2%, base-j 0.5% (0.08 vs 0.035)
    assert recommend(evidence, cost_weight=0.01).best == "default"
    assert recommend(evidence, cost_weight=0.05).recipe == "base-j"  # at 5%: 0.0 vs 0.015


def test_no_evidence_is_an_error() -> None:
    with pytest.raises(ReviewError):
        recommend([])


CURRENT = AutoState("default", "2026-11-16")


@pytest.mark.parametrize(
    ("current", "review_id", "status", "recommended", "auto", "switch", "recipe"),
    [
        (CURRENT, "2026-11-23", OK, "naive", True, True, "naive"),
        (None, "2026-11-23", OK, "naive", True, True, "naive"),
        (CURRENT, "2026-11-23", OK, "naive", False, False, "default"),  # fixed: never
        (CURRENT, "2026-11-23", FAILED, None, True, False, "default"),  # a failed review keeps
        (CURRENT, "2026-11-23", TOO_FEW_DAYS, None, True, False, "default"),  # too few days keeps
        (CURRENT, "2026-11-23", OK, "default", True, False, "default"),  # already running
        (
            AutoState("naive", "2026-11-23"),
            "2026-11-23",
            OK,
            "default",
            True,
            False,
            "naive",
        ),  # once per review
    ],
)
def test_switch_decision(current, review_id, status, recommended, auto, switch, recipe) -> None:  # type: ignore[no-untyped-def]
    got = decide_switch(current, review_id, status, recommended, auto)
    assert (got.switch, got.recipe) == (switch, recipe), got.reason


def _state(home: Path, values: dict, review: str = "2026-11-23", recipe: str = "naive") -> None:
    (home / "reviews").mkdir(parents=True, exist_ok=True)
    (home / "reviews" / "recipe.json").write_text(
        json.dumps({"recipe": recipe, "review_id": review, "values": values})
    )


NAIVE_VALUES = {"recipe.schedule": "joint", "recipe.epochs": 1, "recipe.warm_start": "none"}


def test_auto_layers_the_reviewed_recipe_over_the_file_and_names_the_review(tmp_path: Path) -> None:
    (tmp_path / "ranker.toml").write_text('[recipe]\nbatch_size = 128\n[review]\nrecipe = "auto"\n')
    _state(tmp_path, NAIVE_VALUES)
    got = load(tmp_path)
    assert (got.config.recipe.schedule, got.config.recipe.epochs, got.config.recipe.warm_start) == (
        "joint",
        1,
        "none",
    )
    assert got.sources["recipe.schedule"] == "review:2026-11-23:naive"
    assert got.config.recipe.batch_size == 128  # what the recipe does not set stays the workspace's
    # an operator's flag or Param still wins over the review
    assert load(tmp_path, params={"recipe.epochs": 3}).config.recipe.epochs == 3


def test_fixed_ignores_the_review_state(tmp_path: Path) -> None:
    _state(tmp_path, NAIVE_VALUES)
    got = load(tmp_path)  # review.recipe defaults to fixed
    assert got.config.recipe.warm_start == "base" and got.sources["recipe.schedule"] == "default"
    # and auto without any review yet trains [recipe] as configured
    (tmp_path / "reviews" / "recipe.json").unlink()
    (tmp_path / "ranker.toml").write_text('[review]\nrecipe = "auto"\n')
    assert load(tmp_path).config.recipe.warm_start == "base"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json", "cannot read the reviewed recipe"),
        (json.dumps({"recipe": "x"}), "not a reviewed recipe"),
        (
            json.dumps({"recipe": "x", "review_id": "2026-12-06", "values": {"gate.tolerance": 0.5}}),
            "gate.tolerance",
        ),
    ],
)
def test_a_bad_review_state_is_one_config_error(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "ranker.toml").write_text('[review]\nrecipe = "auto"\n')
    (tmp_path / "reviews").mkdir()
    (tmp_path / "reviews" / "recipe.json").write_text(text)
    with pytest.raises(ConfigFileError, match=match):
        load(tmp_path)


@pytest.mark.parametrize(
    ("toml", "match"),
    [
        ('[review]\nbaseline = "meda"\n', "baseline 'meda' must be one of the recipes"),
        ('[review]\nrecipes = ["../x", "naive"]\n', "not a recipe name"),
        ('[review]\nrecipe = "yes"\n', "review.recipe"),
    ],
)
def test_bad_review_config_exits_2_in_one_line(
    tmp_path: Path, toml: str, match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.cli.main import main

    (tmp_path / "ranker.toml").write_text(toml)
    assert main(["review", "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0], err


# the log B (a grocery panel, 14 days): base-j's candidates resolve a gain over naive,
# its served models do not
LOG_B_SERVED = [NAIVE, ev("base-j", 0.0147, -0.0026, 0.0312, 91), ev("default", 0.0103, -0.0077, 0.0291, 96)]
LOG_B_CANDIDATES = [
    NAIVE,
    ev("base-j", 0.0314, 0.0162, 0.0467, 91),
    ev("default", 0.0257, 0.0110, 0.0417, 96),
]


def test_unresolved_served_lifts_fall_back_on_candidates_the_gate_would_promote() -> None:
    rates = {"naive": 0.64, "base-j": 0.71, "default": 0.64}
    got = decide(LOG_B_SERVED, LOG_B_CANDIDATES, rates, baseline="naive")
    # default's CI reaches base-j's lower bound and... costs more: base-j, the best and the cheaper
    assert (got.recipe, got.basis, got.significant) == ("base-j", "candidate", True)
    assert "no served gain resolves" in got.reason and "which the gate would have promoted" in got.reason
    # the served lifts alone kept naive, as the review on main did
    assert recommend(LOG_B_SERVED, baseline="naive").recipe == "naive"


def test_candidates_the_gate_would_reject_do_not_count() -> None:
    rates = {"naive": 0.64, "base-j": 0.2, "default": 0.3}
    got = decide(LOG_B_SERVED, LOG_B_CANDIDATES, rates, baseline="naive")
    assert (got.recipe, got.basis) == ("naive", "served")
    assert "base-j +3.14% [+1.62%, +4.67%]: the gate promoted 20% of its candidates (< 50%)" in got.reason
    # the bar is the config's: at 0.25 base-j counts again
    assert (
        decide(LOG_B_SERVED, LOG_B_CANDIDATES, rates, baseline="naive", min_promotion_rate=0.2).recipe
        == "base-j"
    )


def test_candidates_whose_served_models_lost_significantly_do_not_count() -> None:
    served = [NAIVE, ev("base-j", -0.03, -0.05, -0.01, 91)]
    candidates = [NAIVE, ev("base-j", 0.03, 0.01, 0.05, 91)]
    got = decide(served, candidates, {"base-j": 1.0}, baseline="naive")
    assert got.recipe == "naive" and "served models lost significantly" in got.reason


def test_a_resolved_served_gain_decides_on_its_own() -> None:
    served = [NAIVE, ev("default", 0.05, 0.02, 0.08, 96), ev("base-j", 0.0, -0.02, 0.015, 91)]
    candidates = [NAIVE, ev("default", 0.01, -0.01, 0.03, 96), ev("base-j", 0.09, 0.05, 0.12, 91)]
    got = decide(served, candidates, {"default": 1.0, "base-j": 1.0}, baseline="naive")
    assert (got.recipe, got.basis) == ("default", "served")


def test_a_candidate_only_review_decides_on_candidates() -> None:
    got = decide(None, LOG_B_CANDIDATES, {}, baseline="naive")
    assert (got.recipe, got.basis) == ("base-j", "candidate")


def test_minimum_detectable_effect_and_the_days_it_takes() -> None:
    # a 95% CI 4 points wide: se = 0.04 / (2 x 1.96); MDE = (1.96 + 0.8416) x se
    mde = minimum_detectable_effect([-0.01, 0.03], 0.95)
    assert mde == pytest.approx((1.959964 + 0.841621) * 0.04 / (2 * 1.959964), rel=1e-5)
    assert mde == pytest.approx(0.02859, abs=1e-4)
    # a narrower CI detects less; at 90% the same width is a larger standard error
    assert minimum_detectable_effect([0.0, 0.02], 0.95) == pytest.approx(mde / 2)
    assert minimum_detectable_effect([-0.01, 0.03], 0.90) > mde
    # 1% takes (mde / 1%)^2 times the days: 14 d x 8.17 -> 115 d; an effect already detectable: the days run
    assert days_to_detect(mde, 14, 0.01) == 115
    assert days_to_detect(mde, 14, 0.05) == 14
    assert days_to_detect(0.0, 14, 0.01) is None
