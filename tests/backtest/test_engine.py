"""Backtest bookkeeping with a scripted replayer (the real registry, constructed models): per-recipe
isolation, served = the champion before the day's decision, the first day's rule, reuse on re-run
and what invalidates it. The real `ranker run` path is in test_backtest_cli.py (slow)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.backtest.compare import compare_to_baseline
from ranking.backtest.engine import Backtest
from ranking.backtest.report import build_report, write_report
from ranking.backtest.spec import BacktestError, BacktestSpec, read_recipe
from ranking.core.atomic import atomic_write_json
from ranking.core.workspace import Workspace
from ranking.evaluation.metrics import compute_metrics
from ranking.registry import Registry
from ranking.registry.records import Verdict

START = dt.date(2026, 3, 1)
# the bootstrap's settings a spec is given (the config's [backtest] in `ranker backtest`)
BOOTSTRAP = {"bootstrap_samples": 100, "ci_level": 0.95, "seed": 0}
NOISE = {"naive": 1.5, "default": 0.3, "based": 0.3}  # the constructed quality of each recipe's models


def _eval_day(day: dt.date) -> tuple[pd.DataFrame, np.ndarray]:
    return make_eval_day(requests=120, seed=day.toordinal() % 1000)


def fake_window(ws: Workspace, day: dt.date, days: int, checks: Any) -> Mapping[str, Any]:
    frame, _ = _eval_day(day)
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


class ScriptedReplayer:
    """Does what `ranker run` does to the registry: registers a candidate, records the gate's
    decision (scripted per recipe and day; pass by default) and promotes on pass."""

    def __init__(self, rejects: set[tuple[str, dt.date]] | None = None) -> None:
        self.rejects = rejects or set()
        self.calls: list[tuple[str, dt.date, str | None]] = []
        self.pretrains: list[tuple[str, dt.date]] = []

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, dict[str, Any]]:
        recipe = home.parent.name
        reg = Registry(str(home / "registry"))
        self.calls.append((recipe, day, reg.champion()))
        # the window step of the day: the shared windows folder (a link in the recipe's home)
        assert (home / "windows" / f"{day.isoformat()}_20d" / "manifest.json").is_file()
        frame, propensity = _eval_day(day)
        seed = len(self.calls)
        run = home / "runs" / run_id
        run.mkdir(parents=True)
        (run / "model.pt").write_text(json.dumps({"noise": NOISE[recipe], "seed": seed}))
        (run / "model_config.json").write_text("{}")
        end = day.isoformat()
        (run / "train_manifest.json").write_text(json.dumps({"window": {"end": end, "days": 20}}))
        scores = with_scores(frame, noisy(propensity, NOISE[recipe], seed=seed))
        scores.to_parquet(run / "eval_scores.parquet", index=False)
        metrics = compute_metrics(scores["request_id"], scores["saved"], scores["score"]).to_dict()
        (run / "eval.json").write_text(json.dumps(metrics))
        version = reg.register(run, run_id)
        decision = "reject" if (recipe, day) in self.rejects else "pass"
        failed = ["save_hit_at_3_change"] if decision == "reject" else []
        pipeline = home / "pipeline" / run_id
        atomic_write_json(pipeline / "train.json", _summary("train", version=version, duration_seconds=2.5))
        atomic_write_json(pipeline / "gate.json", _summary("gate", decision=decision, failed_checks=failed))
        reg.record_verdict(version, Verdict(decision=decision, champion_version=reg.champion()))
        promoted = decision == "pass"
        if promoted:
            reg.promote(version, reason="test", force=True)
        summary = {"version": version, "decision": decision, "promoted": promoted, "failed_checks": failed}
        return (0 if promoted else 1), summary

    def run_pretrain(
        self, home: Path, day: dt.date, run_id: str, log_path: Path
    ) -> tuple[int, dict[str, Any]]:
        """What `ranker pretrain` does to the registry: a version for [day-40, day-20), the base."""
        reg = Registry(str(home / "registry"))
        self.pretrains.append((home.parent.name, day))
        run = home / "runs" / run_id
        run.mkdir(parents=True)
        end = (day - dt.timedelta(days=20)).isoformat()
        (run / "model.pt").write_text(json.dumps({"noise": 2.0, "seed": 0}))
        (run / "model_config.json").write_text("{}")
        (run / "train_manifest.json").write_text(json.dumps({"window": {"end": end, "days": 20}}))
        frame, propensity = _eval_day(day)
        with_scores(frame, propensity).to_parquet(run / "eval_scores.parquet", index=False)
        (run / "eval.json").write_text("{}")
        version = reg.register(run, run_id)
        reg.set_base(version, reason="test")
        start = (day - dt.timedelta(days=40)).isoformat()
        return 0, {"version": version, "base_range": [start, end], "duration_seconds": 4.0}

    def score(self, checkpoint: Path, eval_parquet: Path) -> pd.DataFrame:
        payload = json.loads(Path(checkpoint).read_text())
        frame = pd.read_parquet(eval_parquet)
        day = dt.date.fromisoformat(Path(eval_parquet).parent.name.split("_")[0])
        _, propensity = _eval_day(day)
        return with_scores(frame, noisy(propensity, payload["noise"], seed=payload["seed"]))


def _recipe_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "naive": '[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\n',
        "default": '[recipe]\nschedule = "delayed"\nepochs = 3\nwarm_start = "champion"\n[metrics]\npushgateway = "http://prod:9091"\n',
    }
    out = {}
    for name, text in files.items():
        out[name] = tmp_path / f"{name}.toml"
        out[name].write_text(text)
    return out


def _backtest(
    tmp_path: Path,
    replayer: ScriptedReplayer,
    days: int = 4,
    code: str = "code-1",
    files: dict[str, Path] | None = None,
) -> Backtest:
    files = files or _recipe_files(tmp_path)
    spec = BacktestSpec(
        start=START,
        days=days,
        recipes=tuple(read_recipe(n, p) for n, p in files.items()),
        baseline="naive",
        **BOOTSTRAP,
    )
    ws = Workspace.resolve(tmp_path / "home")
    return Backtest(ws, spec, replayer, code_version=code, window_builder=fake_window)


def test_each_recipe_replays_in_its_own_registry_sharing_windows(tmp_path: Path) -> None:
    bt = _backtest(tmp_path, ScriptedReplayer())
    records = bt.run()
    for name in ("naive", "default"):
        home = bt.folder / name / "home"
        assert Registry(str(home / "registry")).version_ids() == ["v0001", "v0002", "v0003", "v0004"]
        assert len(list((home / "runs").iterdir())) == 4
        assert (home / "windows").resolve() == (tmp_path / "home" / "windows").resolve()
        assert [r.day for r in records[name]] == [
            (START + dt.timedelta(days=i)).isoformat() for i in range(4)
        ]
    assert not (tmp_path / "home" / "registry").exists()  # the backtested workspace's registry is untouched
    naive = (bt.folder / "naive" / "home" / "ranker.toml").read_text()
    assert 'schedule = "joint"' in naive and 'warm_start = "none"' in naive
    default = (bt.folder / "default" / "home" / "ranker.toml").read_text()
    # a recipe's metrics never go to a Pushgateway from a backtest
    assert 'pushgateway = ""' in default and "prod" not in default


def test_served_is_the_champion_before_the_days_decision(tmp_path: Path) -> None:
    replayer = ScriptedReplayer(rejects={("default", START + dt.timedelta(days=1))})
    records = _backtest(tmp_path, replayer).run()["default"]
    served = [r.served.version if r.served else None for r in records]
    before = [r.champion_before for r in records]
    # day 1 promotes v0001; day 2 rejects v0002: v0001 still serves on day 3 (age 2); day 3 promotes v0003
    assert served == [None, "v0001", "v0001", "v0003"] == before
    assert [r.served.age_days if r.served else None for r in records] == [None, 1, 2, 1]
    assert [r.promoted for r in records] == [True, False, True, True]
    assert records[1].failed_checks == ["save_hit_at_3_change"]
    # the served metrics are those of that model on that day (v0001: the fake's call 5, after naive's four)
    frame, propensity = _eval_day(START + dt.timedelta(days=2))
    want = compute_metrics(frame["request_id"], frame["saved"], noisy(propensity, NOISE["default"], seed=5))
    assert records[2].metric("served", "save_hit_at_3") == pytest.approx(want.save_hit_at_3)
    assert replayer.calls[4:] == [
        ("default", START, None),
        ("default", START + dt.timedelta(days=1), "v0001"),
        ("default", START + dt.timedelta(days=2), "v0001"),
        ("default", START + dt.timedelta(days=3), "v0003"),
    ]


def test_the_first_days_rule_days_without_a_served_model_are_left_out(tmp_path: Path) -> None:
    """naive rejects on day 1 too: it serves nothing on days 1 and 2; default serves from day 2.
    The comparison covers only days both served (3 and 4); the means cover each recipe's own."""
    replayer = ScriptedReplayer(rejects={("naive", START)})
    bt = _backtest(tmp_path, replayer)
    records = bt.run()
    assert [r.served for r in records["naive"][:2]] == [None, None]
    comparisons = compare_to_baseline(bt, records)
    c = comparisons["default"]
    assert c is not None and c.days == 2 and [d.day for d in c.per_day] == ["2026-03-03", "2026-03-04"]
    report = build_report(bt.spec, records, comparisons, 1.0)
    assert report.recipes["naive"].served_days == 2 and report.recipes["default"].served_days == 3
    assert report.recipes["naive"].promotions == 3
    assert report.recipes["naive"].promotion_rate == pytest.approx(0.75)
    # the better-constructed recipe serves better than the baseline, and the CI says so
    assert c.relative_change["save_hit_at_3"] > 0 and c.ci["save_hit_at_3"][0] > 0  # type: ignore[index]
    paths = write_report(report, tmp_path / "report")
    text = Path(paths["json"]).read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite {c} in the report JSON"))
    assert Path(paths["png"]).stat().st_size > 1000
    md = Path(paths["markdown"]).read_text()
    assert "| 2026-03-01 | — | — | — |" in md  # naive's first day: nothing served


def test_a_rerun_reuses_finished_days_and_extends(tmp_path: Path) -> None:
    replayer = ScriptedReplayer()
    first = _backtest(tmp_path, replayer, days=3).run()
    assert len(replayer.calls) == 6
    again = _backtest(tmp_path, replayer, days=3).run()
    assert len(replayer.calls) == 6 and again == first
    longer = _backtest(tmp_path, replayer, days=4).run()
    assert [c[1] for c in replayer.calls[6:]] == [START + dt.timedelta(days=3)] * 2
    assert longer["naive"][:3] == first["naive"]


def test_a_shorter_replay_under_the_same_id_is_refused_and_keeps_the_longer_one(tmp_path: Path) -> None:
    replayer = ScriptedReplayer()
    longer = _backtest(tmp_path, replayer, days=4).run()
    with pytest.raises(BacktestError, match=r"recipe naive has 1 recorded day\(s\) after 2026-03-03"):
        _backtest(tmp_path, replayer, days=3).run()
    assert len(replayer.calls) == 8  # nothing replayed
    assert _backtest(tmp_path, replayer, days=4).run() == longer and len(replayer.calls) == 8


def test_a_changed_recipe_or_code_replays_that_recipe_from_an_empty_registry(tmp_path: Path) -> None:
    replayer = ScriptedReplayer()
    files = _recipe_files(tmp_path)
    _backtest(tmp_path, replayer, days=2, files=files).run()
    files["default"].write_text('[recipe]\nschedule = "delayed"\nepochs = 2\nwarm_start = "champion"\n')
    _backtest(tmp_path, replayer, days=2, files=files).run()
    assert [c[:2] for c in replayer.calls[4:]] == [
        ("default", START),
        ("default", START + dt.timedelta(days=1)),
    ]
    assert replayer.calls[4][2] is None  # restarted without a champion
    home = tmp_path / "home" / "backtests" / "from-2026-03-01" / "default" / "home"
    assert Registry(str(home / "registry")).version_ids() == ["v0001", "v0002"]
    _backtest(tmp_path, replayer, days=2, files=files, code="code-2").run()
    assert len(replayer.calls) == 6 + 4  # a new code version replays every recipe


def test_an_interrupted_day_is_replayed_unless_it_moved_the_champion(tmp_path: Path) -> None:
    replayer = ScriptedReplayer(rejects={("naive", START + dt.timedelta(days=2))})
    bt = _backtest(tmp_path, replayer, days=3)
    bt.run()
    # naive's day 3 rejected (champion unchanged); default's day 3 promoted: lose both records
    for name in ("naive", "default"):
        (bt.folder / name / "days" / "2026-03-03.json").unlink()
    _backtest(tmp_path, replayer, days=3).run()
    rerun = [c[:2] for c in replayer.calls[6:]]
    assert rerun.count(("naive", START + dt.timedelta(days=2))) == 1 and rerun.count(("naive", START)) == 0
    # default's registry is ahead of its records (v0003 promoted): it is replayed from day 1
    assert [d for n, d in rerun if n == "default"] == [START + dt.timedelta(days=i) for i in range(3)]


def test_bad_specs_and_recipes_are_one_line_errors(tmp_path: Path) -> None:
    files = _recipe_files(tmp_path)
    recipes = tuple(read_recipe(n, p) for n, p in files.items())
    with pytest.raises(BacktestError, match="--baseline 'other' is not one of the recipes"):
        BacktestSpec(start=START, days=2, recipes=recipes, baseline="other", **BOOTSTRAP)
    with pytest.raises(BacktestError, match="unique"):
        BacktestSpec(start=START, days=2, recipes=(recipes[0], recipes[0]), baseline="naive", **BOOTSTRAP)
    with pytest.raises(BacktestError, match="no file"):
        read_recipe("x", tmp_path / "missing.toml")
    files["naive"].write_text("[recipe]\nepochs = 0\n")
    with pytest.raises(
        BacktestError, match=r"recipe naive: config error: recipe\.epochs: must be >= 1 \(got 0\)"
    ):
        _backtest(tmp_path, ScriptedReplayer(), files=files)


def test_a_recipe_on_the_base_pretrains_before_day_one_and_every_n_days(tmp_path: Path) -> None:
    files = _recipe_files(tmp_path)
    files["based"] = tmp_path / "based.toml"
    files["based"].write_text('[recipe]\nwarm_start = "base"\n[pretrain]\nevery_days = 3\n')
    replayer = ScriptedReplayer()
    bt = _backtest(tmp_path, replayer, days=7, files=files)
    records = bt.run()
    # the base's ranges are built in the backtested workspace before any recipe runs
    windows = tmp_path / "home" / "windows"
    assert all(
        (windows / f"{START + dt.timedelta(days=i - 20)}_20d" / "manifest.json").is_file() for i in range(7)
    )
    # only the recipe that uses the base pretrains: on day 1, then when the base is 3 days old
    assert replayer.pretrains == [("based", START + dt.timedelta(days=i)) for i in (0, 3, 6)]
    pretrained = [r.day for r in records["based"] if r.pretrain]
    assert pretrained == [(START + dt.timedelta(days=i)).isoformat() for i in (0, 3, 6)]
    assert all(r.pretrain is None for r in records["naive"] + records["default"])
    reg = Registry(str(bt.folder / "based" / "home" / "registry"))
    assert len(reg.history("base")) == 3 and reg.base() == records["based"][6].pretrain.version  # type: ignore[union-attr]
    report = build_report(bt.spec, records, compare_to_baseline(bt, records), 1.0)
    summary = report.recipes["based"]
    assert summary.pretrains == 3 and summary.pretrain_seconds == 12.0
    assert summary.total_train_seconds == 12.0 + 7 * 2.5  # the fake's train step takes 2.5 s


def test_candidates_are_compared_day_by_day_on_their_own_scores(tmp_path: Path) -> None:
    """The candidate comparison pairs each day's candidates, also on days a recipe served nothing."""
    replayer = ScriptedReplayer(rejects={("naive", START), ("naive", START + dt.timedelta(days=1))})
    bt = _backtest(tmp_path, replayer)
    records = bt.run()
    served = compare_to_baseline(bt, records)["default"]
    candidates = compare_to_baseline(bt, records, who="candidate")["default"]
    assert served is not None and served.days == 1  # naive served only on day 4
    assert candidates is not None and candidates.days == 4
    assert all((bt.folder / "default" / str(r.scores_of("candidate"))).is_file() for r in records["default"])
    # the candidate scores are the registered version's eval scores
    v1 = Registry(str(bt.folder / "naive" / "home" / "registry")).read_file("v0001", "eval_scores.parquet")
    assert (bt.folder / "naive" / str(records["naive"][0].scores_of("candidate"))).read_bytes() == v1
    assert candidates.relative_change["save_hit_at_3"] > 0
    md_report = build_report(bt.spec, records, compare_to_baseline(bt, records), 1.0, {"default": candidates})
    paths = write_report(md_report, tmp_path / "report")
    assert "Candidates: each day's freshly trained model" in Path(paths["markdown"]).read_text()


def test_a_days_step_summaries_are_read_through_their_models(tmp_path: Path) -> None:
    """The backtest reads what a day's steps recorded through their models (issue 22): a missing
    summary is None, a failed step's record is not taken for a judgement, and a summary that does
    not fit its model stops the backtest in one line naming the file and the field."""
    from ranking.backtest.day import step_summary
    from ranking.core.summaries import GateSummary, StepError

    folder = tmp_path / "pipeline" / "R"
    assert step_summary(tmp_path, "R", "gate") is None
    atomic_write_json(folder / "gate.json", _summary("gate", decision="reject"))
    judged = step_summary(tmp_path, "R", "gate")
    assert isinstance(judged, GateSummary) and judged.decision == "reject"
    atomic_write_json(folder / "gate.json", {"step": "gate", "exit_code": 2, "error": "no champion file"})
    assert isinstance(step_summary(tmp_path, "R", "gate"), StepError)
    atomic_write_json(folder / "train.json", _summary("train", epochs="three"))
    with pytest.raises(BacktestError) as bad:
        step_summary(tmp_path, "R", "train")
    message = str(bad.value)
    assert "train.json: not a train summary (epochs:" in message and "\n" not in message
