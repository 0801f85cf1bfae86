"""Pure decisions of the retrain DAG on step summaries and task states."""

from __future__ import annotations

from typing import Any

import pytest
from ranker_dags import decisions as d
from ranker_dags.settings import OrchestrationSettings, SettingsError

PLAN: dict[str, Any] = {
    "run_id": "r1",
    "window_end": "2026-01-24",
    "window_days": 20,
    "dry_run": False,
    "force_promote": False,
    "reason": "",
}
WINDOW = {
    "end": "2026-01-24",
    "days": 20,
    "rows_train": 1000,
    "rows_eval": 50,
    "days_built": 1,
    "days_reused": 20,
    "label_rate": 0.04,
}


def test_freshness_needs_the_eval_day_in_the_source() -> None:
    assert d.freshness_problem({"latest_source_date": "2026-01-24"}, "2026-01-24") is None
    assert d.freshness_problem({"latest_source_date": "2026-01-25T02:00:00+00:00"}, "2026-01-24") is None
    assert "has not landed" in (d.freshness_problem({"latest_source_date": "2026-01-23"}, "2026-01-24") or "")
    assert "no data" in (d.freshness_problem({"latest_source_date": None}, "2026-01-24") or "")


def test_a_complete_window_passes() -> None:
    assert d.window_problems(WINDOW, PLAN) == []
    # days the builder allowed to be missing are not expected among the built/reused ones
    tolerated = {**WINDOW, "days_reused": 18, "missing_days": ["2026-01-10", "2026-01-11"]}
    assert d.window_problems(tolerated, PLAN) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"end": "2026-01-23"}, "window end"),
        ({"days": 10}, "window days"),
        ({"rows_train": 0}, "rows_train is 0"),
        ({"rows_eval": None}, "rows_eval is None"),
        ({"days_built": 0, "days_reused": 20}, "!= 21"),
        ({"label_rate": 0.0}, "degenerate"),
    ],
)
def test_window_problems_are_named(change: dict[str, Any], message: str) -> None:
    problems = d.window_problems({**WINDOW, **change}, PLAN)
    assert any(message in p for p in problems), problems


DECISION = {
    "branch": "promote",
    "reason": "gate passed for window ending 2026-01-24 (run r1)",
    "force": False,
}


def test_decide_hands_the_run_flags_to_ranker_decide() -> None:
    assert d.decide_args(PLAN, "v0007") == ["decide", "--candidate", "v0007", "--end", "2026-01-24"]
    forced = {**PLAN, "force_promote": True, "reason": "incident 7"}
    assert d.decide_args(forced, "v0007")[-3:] == ["--force-promote", "--reason", "incident 7"]
    assert d.decide_args({**PLAN, "dry_run": True}, "v0007")[-1] == "--dry-run"


@pytest.mark.parametrize("branch", [d.PROMOTE, d.RECORD_REJECTION, d.KEEP_CHAMPION])
def test_the_branch_is_the_task_ranker_decide_names(branch: str) -> None:
    assert d.branch_task({**DECISION, "branch": branch}) == branch


def test_an_unknown_branch_is_a_broken_contract() -> None:
    for bad in ({}, {"branch": "ship_it"}, {"branch": None}):
        with pytest.raises(ValueError, match="ranker decide answered branch"):
            d.branch_task(bad)


def test_promote_and_reject_carry_the_decided_reason() -> None:
    decided = {**DECISION, "version": "v0007"}
    assert d.promote_args(decided) == ["promote", "v0007", "--reason", DECISION["reason"]]
    assert d.promote_args({**decided, "force": True})[-1] == "--force"
    rejected = {**decided, "branch": "record_rejection", "reason": "gate rejected: auc_drop"}
    assert d.reject_args(rejected) == ["reject", "v0007", "--reason", "gate rejected: auc_drop"]


POLICY = ("gate_branch", "promotion_reason", "rejection_reason", "champion_trained_for")


def test_the_dags_hold_no_promotion_policy() -> None:
    """The branch decision is `ranker decide`'s (ranking/pipeline/policy.py); the DAG only wires it."""
    import ast

    from dag_test_paths import DAGS

    for path in DAGS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert not defined & set(POLICY), (path, defined & set(POLICY))
        texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert not [t for t in texts if "gate passed" in t or "forced past" in t], path
    retrain = (DAGS / "ranker_retrain.py").read_text()
    assert "decisions.decide_args(" in retrain and "decisions.branch_task(" in retrain


ALL_OK = {
    "plan": "success",
    "check_freshness": "success",
    "build_window": "success",
    "validate_window": "success",
    "train": "success",
    "gate": "success",
    "decide": "success",
    "promote": "success",
    "record_rejection": "skipped",
    "keep_champion": "skipped",
    "materialize_online": "success",
}


def test_outcomes_and_publish_arguments() -> None:
    assert d.run_outcome(ALL_OK) == d.OUTCOME_PROMOTED
    assert d.publish_args(ALL_OK) == ["metrics", "publish", "--status", "success"]
    rejected = {**ALL_OK, "promote": "skipped", "record_rejection": "success"}
    assert d.run_outcome(rejected) == d.OUTCOME_REJECTED
    assert d.publish_args(rejected)[-1] == "success"
    dry = {**ALL_OK, "promote": "skipped", "keep_champion": "success"}
    assert d.run_outcome(dry) == d.OUTCOME_KEPT


def test_the_root_failure_is_the_first_failed_step_not_its_consequences() -> None:
    states = {
        **ALL_OK,
        "train": "failed",
        "gate": "upstream_failed",
        "decide": "upstream_failed",
        "promote": "upstream_failed",
        "materialize_online": "upstream_failed",
    }
    assert d.run_outcome(states) == d.OUTCOME_FAILED
    assert d.publish_args(states) == ["metrics", "publish", "--status", "failed", "--failed-step", "train"]
    # a failure after a promotion still fails the run (stale online features are an incident)
    late = {**ALL_OK, "materialize_online": "failed"}
    assert d.publish_args(late)[-2:] == ["--failed-step", "materialize"]
    assert d.publish_args({"plan": "failed"})[-1] == "other"


def test_settings_from_env_and_their_validation() -> None:
    s = OrchestrationSettings.from_env(
        {"RANKER_LAUNCHER": "docker", "RANKER_TRAIN_GPUS": "4", "RANKER_HOME": "/srv/w"}
    )
    assert (s.launcher, s.train_gpus, s.home) == ("docker", 4, "/srv/w")
    assert OrchestrationSettings.from_env({}).launcher == "local"
    assert OrchestrationSettings.from_env({}).retry_delay.total_seconds() == 60
    assert OrchestrationSettings.from_env({"RANKER_RETRY_DELAY_S": "5"}).retry_delay.total_seconds() == 5
    for env, message in [
        ({"RANKER_RETRY_DELAY_S": "0"}, "RANKER_RETRY_DELAY_S"),
        ({"RANKER_LAUNCHER": "slurm"}, "RANKER_LAUNCHER"),
        ({"RANKER_TRAIN_GPUS": "two"}, "integer"),
        ({"RANKER_HOME": "relative/path"}, "absolute"),
        ({"RANKER_RETRAIN_CRON": "daily"}, "cron"),
        ({"RANKER_TRAINER_IMAGE": "img; rm -rf /"}, "image"),
        ({"RANKER_K8S_NAMESPACE": "Bad_NS"}, "DNS label"),
    ]:
        with pytest.raises(SettingsError, match=message):
            OrchestrationSettings.from_env(env)
