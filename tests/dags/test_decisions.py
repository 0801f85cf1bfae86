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


@pytest.mark.parametrize(
    ("decision", "plan_change", "branch"),
    [
        ("pass", {}, d.PROMOTE),
        ("reject", {}, d.RECORD_REJECTION),
        ("reject", {"force_promote": True, "reason": "incident 7"}, d.PROMOTE),
        ("pass", {"dry_run": True}, d.KEEP_CHAMPION),
        ("reject", {"dry_run": True}, d.KEEP_CHAMPION),
    ],
)
def test_gate_branch(decision: str, plan_change: dict[str, Any], branch: str) -> None:
    assert d.gate_branch({"decision": decision}, {**PLAN, **plan_change}) == branch


def test_a_rerun_of_a_date_that_already_promoted_keeps_the_champion() -> None:
    rerun = {"decision": "pass", "champion_trained_for": "2026-01-24"}
    assert d.gate_branch(rerun, PLAN) == d.KEEP_CHAMPION
    assert (
        d.gate_branch(rerun, {**PLAN, "force_promote": True, "reason": "retrained on fixed data"})
        == d.PROMOTE
    )
    assert d.gate_branch({**rerun, "champion_trained_for": "2026-01-23"}, PLAN) == d.PROMOTE


def test_champion_trained_for_reads_models_list() -> None:
    models = {
        "champion": "v0002",
        "versions": [
            {"version": "v0001", "train": {"train_end": "2026-01-23"}},
            {"version": "v0002", "train": {"train_start": "2026-01-04", "train_end": "2026-01-24"}},
        ],
    }
    assert d.champion_trained_for(models) == "2026-01-24"
    assert d.champion_trained_for({"champion": None, "versions": []}) is None


def test_promotion_reason_forces_only_past_a_rejection() -> None:
    reason, force = d.promotion_reason({"decision": "pass"}, PLAN)
    assert not force and "gate passed" in reason and "2026-01-24" in reason
    forced_plan = {**PLAN, "force_promote": True, "reason": "incident 7"}
    reason, force = d.promotion_reason(
        {"decision": "reject", "failed_checks": ["relative_change"]}, forced_plan
    )
    assert force and "incident 7" in reason and "relative_change" in reason


def test_rejection_reason_lists_the_failed_checks() -> None:
    reason = d.rejection_reason({"decision": "reject", "failed_checks": ["value_floor", "auc_drop"]}, PLAN)
    assert "value_floor, auc_drop" in reason


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
    for env, message in [
        ({"RANKER_LAUNCHER": "slurm"}, "RANKER_LAUNCHER"),
        ({"RANKER_TRAIN_GPUS": "two"}, "integer"),
        ({"RANKER_HOME": "relative/path"}, "absolute"),
        ({"RANKER_RETRAIN_CRON": "daily"}, "cron"),
        ({"RANKER_TRAINER_IMAGE": "img; rm -rf /"}, "image"),
        ({"RANKER_K8S_NAMESPACE": "Bad_NS"}, "DNS label"),
    ]:
        with pytest.raises(SettingsError, match=message):
            OrchestrationSettings.from_env(env)
