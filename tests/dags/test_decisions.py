"""Pure decisions of the retrain DAG on step summaries and task states."""

from __future__ import annotations

from typing import Any

import pytest
from ranker_dags import decisions as d
from ranker_dags.retrain_graph import RETRAIN
from ranker_dags.settings import OrchestrationSettings, SettingsError

DECISION = {
    "branch": "promote",
    "reason": "gate passed for window ending 2026-01-24 (run r1)",
    "force": False,
}
DECIDE = RETRAIN["decide"]


@pytest.mark.parametrize("branch", DECIDE.branches)
def test_the_branch_followed_is_the_step_the_decision_names(branch: str) -> None:
    assert d.chosen_branch(DECIDE, {**DECISION, "branch": branch}) == branch


def test_an_unknown_branch_is_a_broken_contract() -> None:
    for bad in ({}, {"branch": "ship_it"}, {"branch": None}):
        with pytest.raises(ValueError, match="decide answered branch"):
            d.chosen_branch(DECIDE, bad)


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
    retrain = (DAGS / "ranker_dags" / "retrain_tasks.py").read_text()  # the retrain's task bodies
    assert "decisions.chosen_branch(" in retrain  # follows the decide step's answer


ALL_OK = {
    "plan": "success",
    "check_freshness": "success",
    "build_window": "success",
    "validate_window": "success",
    "train": "success",
    "gate": "success",
    "decide": "success",
    "decide_branch": "success",
    "promote": "success",
    "record_rejection": "skipped",
    "keep_champion": "skipped",
    "materialize_online": "success",
}


def test_outcomes_and_what_the_publish_step_takes() -> None:
    assert d.run_outcome(ALL_OK) == d.OUTCOME_PROMOTED
    assert d.run_so_far(ALL_OK) == {"status": "success", "failed_step": None}
    rejected = {**ALL_OK, "promote": "skipped", "record_rejection": "success"}
    assert d.run_outcome(rejected) == d.OUTCOME_REJECTED
    assert d.run_so_far(rejected)["status"] == "success"
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
    assert d.run_so_far(states) == {"status": "failed", "failed_step": "train"}
    # a failure after a promotion still fails the run (stale online features are an incident)
    late = {**ALL_OK, "materialize_online": "failed"}
    assert d.run_so_far(late)["failed_step"] == "materialize"
    assert d.run_so_far({"plan": "failed"})["failed_step"] == "other"
    # the decision's branch task fails as the decision does (ranker_run_failures_total{step="gate"})
    assert (
        d.run_so_far({**ALL_OK, "decide_branch": "failed", "promote": "upstream_failed"})["failed_step"]
        == "gate"
    )


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


REJECTED_REPORT: dict[str, Any] = {
    "decision": "reject",
    "candidate": {"version": "v0002", "save_hit_at_3": 0.3851},
    "champion": {"version": "v0001", "save_hit_at_3": 0.3884},
    "checks": [
        {"name": "min_save_hit_at_3", "passed": True, "value": 0.3851, "threshold": 0.0, "detail": "floor"},
        {
            "name": "save_hit_at_3_change",
            "passed": False,
            "value": -0.00861,
            "threshold": -0.05,
            "detail": "relative change -0.86%, 90% CI [-6.1%, +4.2%]: lower bound below -5%",
            "ci": [-0.061, 0.042],
        },
        {"name": "fair_comparison", "passed": True, "value": None, "threshold": None, "detail": "fair"},
        {"name": "calibration", "passed": True, "value": 1.02, "threshold": [0.5, 2.0], "detail": "ok"},
    ],
    "failed_checks": ["save_hit_at_3_change"],
}


def test_the_gate_log_has_one_line_per_check_with_value_threshold_and_verdict() -> None:
    lines = d.gate_check_lines(REJECTED_REPORT)
    assert len(lines) == len(REJECTED_REPORT["checks"]) + 1
    change = lines[1]
    assert change.startswith("gate check save_hit_at_3_change: FAIL")
    assert "value=-0.00861" in change and "threshold=-0.05" in change and "lower bound" in change
    assert "gate check min_save_hit_at_3: pass" in lines[0]
    assert "value=- " in lines[2] + " " and "threshold=-" in lines[2]  # a check without numbers
    assert "threshold=[0.5, 2]" in lines[3]
    assert lines[-1] == "gate reject: candidate v0002 vs champion v0001; failed: save_hit_at_3_change"


def test_a_first_run_gate_log_names_the_missing_champion() -> None:
    report = {**REJECTED_REPORT, "decision": "pass", "champion": None, "failed_checks": []}
    assert d.gate_check_lines(report)[-1] == (
        "gate pass: candidate v0002 vs champion none (first run: absolute checks only); every check passed"
    )


def test_the_outcome_tasks_have_distinct_display_names() -> None:
    names = [RETRAIN[t].display for t in DECIDE.branches]
    assert len(set(names)) == 3 and "REJECTED" in str(RETRAIN["record_rejection"].display)
    assert set(d.OUTCOME_OF_BRANCH) == set(DECIDE.branches)
