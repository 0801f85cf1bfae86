"""A review end to end with a scripted replayer (the real engine, registry, rule, switch, report and
metrics; constructed models of chosen quality): what it recommends, when the daily recipe switches
and what a failed or too-short review leaves."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.config.loader import Layer, load, resolve
from ranking.config.model import ReviewSection
from ranking.core.atomic import atomic_write_json
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.evaluation.metrics import compute_metrics
from ranking.monitoring.exposition import parse_exposition
from ranking.registry import Registry
from ranking.registry.records import Verdict
from ranking.review.rule import minimum_detectable_effect
from ranking.review.run import ReviewFailed, plan_review, run_review
from ranking.review.summary import Review

END = dt.date(2026, 3, 8)
RECIPES = {
    "naive": '[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\n',
    "default": '[recipe]\nschedule = "F,J"\nwarm_start = "none"\nseed = 1\n',
}


def _eval_day(day: dt.date) -> tuple[pd.DataFrame, Any]:
    return make_eval_day(requests=150, seed=day.toordinal() % 1000)


def fake_window(ws: Workspace, day: dt.date, days: int, checks: Any) -> Mapping[str, Any]:
    frame, _ = _eval_day(day)
    request = frame["request_id"].str[-2:].astype(int)
    frame = frame.assign(  # what the slices cut by: a quarter of the users first seen, two countries
        user_stats__impressions_28d=(request % 4 != 0) * 10.0,
        pin_stats__impressions_28d=(frame["pin_id"] - 999) * 100.0,
        user_stats__country=(request % 2).map({0: "c1", 1: "c2"}),
    )
    folder = ws.windows / f"{day.isoformat()}_{days}d"
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(folder / "eval.parquet", index=False)
    manifest = {"window_id": f"w-{day.isoformat()}-{days}", "eval": {"path": str(folder / "eval.parquet")}}
    atomic_write_json(folder / "manifest.json", manifest)
    return manifest


def _summary(step: str, **fields: Any) -> dict[str, Any]:
    """A complete recorded summary of ``step`` (what the real step writes: the backtest reads it
    through its model), with the fields this fake decides."""
    from summary_examples import example_summaries

    return example_summaries()[step].model_dump(mode="json") | fields


class Replayer:
    """What `ranker run` does to a recipe's registry, with models of a set noise per recipe;
    ``fail`` makes a recipe's days fail as a crashed run does (exit 2), ``raise_on`` raises."""

    def __init__(
        self,
        noise: Mapping[str, float],
        seconds: Mapping[str, float],
        fail: str | None = None,
        raise_on: str | None = None,
        served_noise: Mapping[str, float] | None = None,
        gate_rejects: frozenset[str] = frozenset(),
    ) -> None:
        self.noise, self.seconds, self.fail, self.raise_on = noise, seconds, fail, raise_on
        # a recipe's models as served score with this noise instead (a world where the served lift
        # hides what the candidates gain); the gate rejects these recipes' candidates once there is a champion
        self.served_noise, self.gate_rejects = served_noise or {}, gate_rejects
        self.days = 0

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, dict[str, Any]]:
        recipe = home.parent.name
        if recipe == self.raise_on:
            raise RankerError(f"{recipe}: the replay broke")
        if recipe == self.fail:
            return 2, {"error": "boom"}
        self.days += 1
        seed = day.toordinal()  # a recipe's model differs from another's only by its noise
        reg = Registry(str(home / "registry"))
        frame, propensity = _eval_day(day)
        run = home / "runs" / run_id
        run.mkdir(parents=True)
        noise = self.served_noise.get(recipe, self.noise[recipe])
        (run / "model.pt").write_text(json.dumps({"noise": noise, "seed": seed}))
        (run / "model_config.json").write_text("{}")
        (run / "train_manifest.json").write_text(json.dumps({"window": {"end": day.isoformat(), "days": 20}}))
        scores = with_scores(frame, noisy(propensity, self.noise[recipe], seed=seed))
        scores.to_parquet(run / "eval_scores.parquet", index=False)
        (run / "eval.json").write_text(
            json.dumps(compute_metrics(scores["request_id"], scores["saved"], scores["score"]).to_dict())
        )
        version = reg.register(run, run_id)
        atomic_write_json(
            home / "pipeline" / run_id / "train.json",
            _summary("train", version=version, duration_seconds=self.seconds[recipe]),
        )
        champion = reg.champion()
        if recipe in self.gate_rejects and champion is not None:
            failed = ["save_hit_at_3_change"]
            atomic_write_json(
                home / "pipeline" / run_id / "gate.json",
                _summary("gate", decision="reject", failed_checks=failed),
            )
            reg.record_verdict(version, Verdict(decision="reject", champion_version=champion))
            return 1, {"version": version, "decision": "reject", "promoted": False}
        atomic_write_json(
            home / "pipeline" / run_id / "gate.json", _summary("gate", decision="pass", failed_checks=[])
        )
        reg.record_verdict(version, Verdict(decision="pass", champion_version=champion))
        reg.promote(version, reason="test", force=True)
        return 0, {"version": version, "decision": "pass", "promoted": True}

    def run_pretrain(
        self, home: Path, day: dt.date, run_id: str, log_path: Path
    ) -> tuple[int, dict[str, Any]]:
        raise AssertionError("no recipe here uses the base")

    def score(self, checkpoint: Path, eval_parquet: Path) -> pd.DataFrame:
        payload = json.loads(Path(checkpoint).read_text())
        frame = pd.read_parquet(eval_parquet)
        day = dt.date.fromisoformat(Path(eval_parquet).parent.name.split("_")[0])
        _, propensity = _eval_day(day)
        return with_scores(frame, noisy(propensity, payload["noise"], seed=payload["seed"]))


SECONDS = {"naive": 40.0, "default": 90.0}


def _review(
    home: Path,
    replayer: Replayer,
    mode: str = "auto",
    days: int = 6,
    min_days: int = 3,
    end: dt.date = END,
    recipes: Mapping[str, str] = RECIPES,
    candidate_only: bool = False,
    run_id: str | None = None,
) -> dict[str, Any]:
    recipes_dir = home.parent / "recipes"
    recipes_dir.mkdir(exist_ok=True)
    for name, text in recipes.items():
        (recipes_dir / f"{name}.toml").write_text(text)
    settings = ReviewSection(
        days=days, min_days=min_days, recipes=list(recipes), baseline="naive",
        recipes_dir=str(recipes_dir), recipe=mode, bootstrap_samples=100, parallel=1,
        candidate_only=candidate_only,
    )  # fmt: skip
    ws = Workspace.resolve(home)
    daily = load(home)
    plan = plan_review(settings, end, daily.config.backtest)
    # the summary as the review writes it (review.json, latest.json) and the command prints it
    return run_review(ws, plan, daily, {}, None, replayer, window_builder=fake_window, run_id=run_id).body()


def test_a_better_recipe_is_recommended_and_auto_switches_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    review = _review(home, Replayer({"naive": 1.5, "default": 0.2}, SECONDS))
    assert review["status"] == "ok" and review["recommended"] == "default"
    served = review["recipes"]["default"]["served"]
    assert served["lift"] > 0 and served["ci"][0] > 0 and served["days"] == 5  # day 1 serves nothing
    assert review["recipes"]["default"]["seconds_per_day"] == pytest.approx(90.0)
    assert review["switch"]["switched"] and review["running"] == "default"
    state = json.loads((home / "reviews" / "recipe.json").read_text())
    assert state["recipe"] == "default" and state["review_id"] == END.isoformat()
    # the daily run now trains the reviewed recipe, and its config names the review that chose it
    (home / "ranker.toml").write_text('[review]\nrecipe = "auto"\n')
    daily = load(home)
    assert daily.config.recipe.schedule == "F,J" and daily.config.recipe.seed == 1
    assert daily.sources["recipe.schedule"] == f"review:{END.isoformat()}:default"
    # the dated report and the exported figures
    folder = home / "reviews" / END.isoformat()
    for name in ("review.json", "review.md", "review.png"):
        assert (folder / name).is_file()
    assert "Recommendation: **default**" in (folder / "review.md").read_text()
    # the better recipe slice by slice: better for first-seen and returning users alike (issue 31)
    slices = {r["name"]: r for r in review["recipes"]["default"]["slices"]["served"]}
    assert {"user:first_seen", "user:returning", "user_stats__country:c1", "pin:tail"} <= set(slices)
    for name in ("user:first_seen", "user:returning"):
        assert slices[name]["days"] == 5 and slices[name]["relative_change"] > 0, slices[name]
    assert slices["user:returning"]["ci"][0] > 0  # three quarters of the saves: enough to resolve
    assert "Slices, served models against the baseline's" in (folder / "review.md").read_text()
    # a re-run of the same review (reuses every day) never switches a second time
    _review(home, Replayer({"naive": 1.5, "default": 0.2}, SECONDS))
    assert len((home / "reviews" / "history.jsonl").read_text().splitlines()) == 1


def test_a_full_review_never_reuses_a_candidate_only_replay_of_the_same_days(tmp_path: Path) -> None:
    """A candidate-only review replays its days as dry runs (nothing promoted, nothing served): a
    full review of the same days replays them again instead of reusing days without served models."""
    home = tmp_path / "home"
    world = Replayer({"naive": 1.5, "default": 0.2}, SECONDS)
    candidates = _review(home, world, mode="fixed", candidate_only=True)
    replayed = world.days
    full = _review(home, world, mode="fixed")
    assert world.days == 2 * replayed == 2 * 6 * len(RECIPES)
    assert full["backtest_dir"] != candidates["backtest_dir"]
    assert full["recipes"]["default"]["served"]["days"] == 5


def test_candidates_gain_decides_where_served_lifts_do_not_resolve(tmp_path: Path) -> None:
    """A world where default's candidates are much better and its served models exactly naive's:
    the review recommends default on the candidates' lifts, and prints each recipe's MDE."""
    world = Replayer({"naive": 1.5, "default": 0.2}, SECONDS, served_noise={"default": 1.5})
    review = _review(tmp_path / "home", world)
    default = review["recipes"]["default"]
    assert default["served"]["lift"] == 0 and default["served"]["ci"] == [0, 0]  # unresolved, by construction
    assert default["candidate"]["ci"][0] > 0 and default["promotion_rate"] == 1
    assert (review["recommended"], review["basis"]) == ("default", "candidate")
    assert "no served gain resolves" in review["reason"]
    # the candidates' MDE is read off their CI: a CI this wide resolves lifts of this size
    assert (
        default["candidate"]["mde"]
        == pytest.approx(minimum_detectable_effect(default["candidate"]["ci"], 0.95))
        and default["candidate"]["mde"] > 0
    )
    text = (tmp_path / "home" / "reviews" / END.isoformat() / "review.md").read_text()
    assert "(decided on the candidate lifts)" in text and "MDE " in text


def test_candidates_the_gate_rejects_leave_the_baseline(tmp_path: Path) -> None:
    """The same world, but the gate rejects default's candidates once it has a champion: their
    gain would never be served, so the review keeps naive and says why."""
    world = Replayer(
        {"naive": 1.5, "default": 0.2},
        SECONDS,
        served_noise={"default": 1.5},
        gate_rejects=frozenset({"default"}),
    )
    review = _review(tmp_path / "home", world)
    default = review["recipes"]["default"]
    assert default["candidate"]["ci"][0] > 0 and default["promotion_rate"] == pytest.approx(1 / 6)
    assert (review["recommended"], review["basis"]) == ("naive", "served")
    assert "the gate promoted 17% of its candidates (< 50%)" in review["reason"]


def test_the_delayed_update_s_own_share_is_printed(tmp_path: Path) -> None:
    """default (F,J) and j (one joint epoch) differ only in the frozen first epoch: the review
    pairs them; naive (another seed) pairs with neither."""
    recipes = {**RECIPES, "j": '[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\nseed = 1\n'}
    review = _review(
        tmp_path / "home",
        Replayer({"naive": 1.5, "default": 0.2, "j": 1.5}, {**SECONDS, "j": 45.0}),
        recipes=recipes,
    )
    (pair,) = review["delayed_update"]
    assert (pair["with"], pair["without"]) == ("default", "j")
    assert pair["candidate"]["ci"][0] > 0 and pair["served"]["days"] == 5
    text = (tmp_path / "home" / "reviews" / END.isoformat() / "review.md").read_text()
    assert "- `default` vs `j`: served +" in text
    # a review without such a pair says it cannot separate the share
    review = _review(tmp_path / "other", Replayer({"naive": 1.5, "default": 0.2}, SECONDS))
    assert review["delayed_update"] == []
    text = (tmp_path / "other" / "reviews" / END.isoformat() / "review.md").read_text()
    assert "no two reviewed recipes differ only in it" in text


def test_no_significant_gain_recommends_naive_and_switches_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _review(home, Replayer({"naive": 1.5, "default": 0.2}, SECONDS), end=END)
    same = Replayer({"naive": 0.8, "default": 0.8}, SECONDS)  # a world where the recipe makes no difference
    review = _review(home, same, end=END + dt.timedelta(days=7))
    assert review["status"] == "ok" and review["recommended"] == "naive", review["reason"]
    assert review["switch"]["switched"]
    history = [json.loads(line) for line in (home / "reviews" / "history.jsonl").read_text().splitlines()]
    assert [(h["recipe"], h["previous"], h["review_id"]) for h in history] == [
        ("default", None, END.isoformat()),
        ("naive", "default", (END + dt.timedelta(days=7)).isoformat()),
    ]


def test_fixed_mode_recommends_but_never_switches(tmp_path: Path) -> None:
    home = tmp_path / "home"
    review = _review(home, Replayer({"naive": 1.5, "default": 0.2}, SECONDS), mode="fixed")
    assert review["recommended"] == "default" and not review["switch"]["switched"]
    assert not (home / "reviews" / "recipe.json").exists()


def test_too_few_days_keep_the_current_recipe(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _review(home, Replayer({"naive": 0.8, "default": 0.8}, SECONDS))  # switches to naive
    review = _review(
        home,
        Replayer({"naive": 1.5, "default": 0.2}, SECONDS),
        days=3,
        min_days=3,
        end=END + dt.timedelta(days=7),
    )
    assert review["status"] == "too_few_days" and review["recommended"] is None  # 2 served days < 3
    assert json.loads((home / "reviews" / "recipe.json").read_text())["recipe"] == "naive"


def test_a_review_shorter_than_min_days_reports_and_keeps_the_recipe(tmp_path: Path) -> None:
    """min_days is what a recommendation needs, not a bound on days: a run asked for fewer days
    (a manual review's Param, which cannot know the workspace's min_days) reports only."""
    home = tmp_path / "home"
    _review(home, Replayer({"naive": 0.8, "default": 0.8}, SECONDS))  # switches to naive
    review = _review(
        home,
        Replayer({"naive": 1.5, "default": 0.2}, SECONDS),
        days=2,
        min_days=3,
        end=END + dt.timedelta(days=7),
    )
    assert (review["status"], review["days"], review["min_days"]) == ("too_few_days", 2, 3)
    assert review["recommended"] is None and review["error"] == "1 paired days < min_days 3"
    assert set(review["recipes"]) == {"naive", "default"}  # still weighed and reported
    assert review["switch"] == {
        "switched": False,
        "recipe": "naive",
        "reason": f"review {(END + dt.timedelta(days=7)).isoformat()} is too_few_days: the current recipe stays",
    }
    assert json.loads((home / "reviews" / "recipe.json").read_text())["recipe"] == "naive"


def test_a_review_whose_baseline_failed_keeps_the_current_recipe(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _review(home, Replayer({"naive": 1.5, "default": 0.2}, SECONDS))  # switches to default
    review = _review(
        home, Replayer({"naive": 0.8, "default": 0.8}, SECONDS, fail="naive"), end=END + dt.timedelta(days=7)
    )
    assert review["status"] == "failed" and "baseline" in review["error"]
    assert json.loads((home / "reviews" / "recipe.json").read_text())["recipe"] == "default"


def test_a_replay_that_raises_is_a_recorded_failed_review_and_keeps_the_recipe(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _review(home, Replayer({"naive": 0.8, "default": 0.8}, SECONDS))  # switches to naive
    with pytest.raises(ReviewFailed, match="the daily recipe stays") as failed:
        _review(
            home,
            Replayer({"naive": 1.5, "default": 0.2}, SECONDS, raise_on="default"),
            end=END + dt.timedelta(days=7),
        )
    assert failed.value.review.status == "failed"
    latest = json.loads((home / "reviews" / "latest.json").read_text())
    assert latest["status"] == "failed" and not latest["switch"]["switched"]
    assert json.loads((home / "reviews" / "recipe.json").read_text())["recipe"] == "naive"


def test_the_review_metrics_hold_the_reviews_figures(tmp_path: Path) -> None:
    from ranking.review.metrics import deliver, review_samples

    review = _review(tmp_path / "home", Replayer({"naive": 1.5, "default": 0.2}, SECONDS), mode="fixed")
    delivered = deliver(
        review_samples(Review.model_validate(review), now=1_800_000_000.0), None, tmp_path / "metrics"
    )
    series = parse_exposition(Path(delivered.target).read_text())
    served = review["recipes"]["default"]["served"]
    assert series['ranker_review_relative_change{model="served",recipe="default"}'] == pytest.approx(
        served["lift"]
    )
    assert series['ranker_review_relative_change_ci_lower{model="served",recipe="default"}'] == pytest.approx(
        served["ci"][0]
    )
    assert series['ranker_review_relative_change{model="served",recipe="naive"}'] == 0.0
    assert series['ranker_review_recommended{recipe="default"}'] == 1.0
    assert series['ranker_review_recommended{recipe="naive"}'] == 0.0
    assert series['ranker_review_status{status="ok"}'] == 1.0
    assert series['ranker_review_train_seconds_per_day{recipe="naive"}'] == pytest.approx(40.0)
    # the workspace's defaults are the shipped default recipe: none of these two, so none runs
    assert series['ranker_review_running{recipe="default"}'] == 0.0


def test_running_recipe_is_the_reviewed_recipe_matching_the_daily_config(tmp_path: Path) -> None:
    from ranking.review.run import running_recipe

    naive = resolve(
        [Layer("file:n", {"recipe.schedule": "joint", "recipe.epochs": 1, "recipe.warm_start": "none"})]
    )
    default = resolve([])
    daily = resolve(
        [
            Layer(
                "file:w",
                {
                    "recipe.schedule": "joint",
                    "recipe.epochs": 1,
                    "recipe.warm_start": "none",
                    "gate.tolerance": 0.05,
                },
            )
        ]
    )
    assert running_recipe(daily, {"naive": naive, "default": default}) == "naive"
    assert running_recipe(resolve([]), {"naive": naive, "default": default}) == "default"
