"""Run parameters of ranker_retrain: JSON-schema Params (checked when a run is created) and the run
plan's cross-field rules and window-end resolution (checked by the first task)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError
from airflow.serialization.serialized_objects import DagSerialization
from ranker_dags.params import PlanError, make_plan, ranker_run_id, resolve_window_end, retrain_params
from ranker_retrain import ranker_retrain

UTC = dt.UTC
SERIALIZED_PARAMS = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(ranker_retrain)).params


def validated(**conf: Any) -> dict[str, Any]:
    """Both checks Airflow makes: at run creation (the serialized DAG's params deep-merged with the
    conf) and in the task runner (the DAG file's ParamsDict updated with the conf)."""
    at_creation = SERIALIZED_PARAMS.deep_merge(conf).validate()
    in_task = ParamsDict(retrain_params())
    in_task.update(conf)
    assert in_task.validate() == at_creation
    return dict(at_creation)


def test_defaults_validate() -> None:
    assert validated() == {
        "window_end": None,
        # empty: the pipeline config's value (<home>/ranker.toml, else the built-in default)
        "window_days": None,
        "epochs": None,
        "schedule": None,
        "pipeline": None,
        "warm_start": None,
        "warm_start_scope": None,
        "tolerance": None,
        "min_hit": None,
        "dry_run": False,
        "force_promote": False,
        "reason": "",
    }


@pytest.mark.parametrize(
    "conf",
    [
        {"window_days": 0},
        {"window_days": 61},
        {"window_days": "20"},
        {"epochs": 0},
        {"epochs": 11},
        {"window_end": "2026-13-01"},
        {"window_end": "2026-02-30"},
        {"window_end": "20260101"},
        {"window_end": "2026-01-01; rm -rf /"},
        {"schedule": "sometimes"},
        {"schedule": "F,X,J"},
        {"schedule": "F,,J"},
        {"schedule": "f,j"},
        {"pipeline": "async"},
        {"warm_start": "yesterday"},
        {"warm_start_scope": "tables"},
        {"tolerance": 1.0},
        {"tolerance": -0.1},
        {"min_hit": 1.5},
        {"dry_run": "yes"},
        {"force_promote": 1},
        {"reason": "x" * 501},
    ],
    ids=lambda c: ",".join(f"{k}={v!s:.20}" for k, v in c.items()),
)
def test_bad_params_are_rejected(conf: dict[str, Any]) -> None:
    with pytest.raises(ParamValidationError):
        validated(**conf)


@pytest.mark.parametrize(
    "conf",
    [
        {"window_end": "2026-01-24", "window_days": 1, "epochs": 10},
        {"schedule": "F,J,J"},
        {"schedule": "joint_then_frozen", "pipeline": "sync"},
        {"tolerance": 0.0, "min_hit": 0.2},
        {"warm_start": "none", "schedule": "joint", "epochs": 1},
        {"warm_start": "champion", "warm_start_scope": "dense"},
        {"force_promote": True, "reason": "hotfix for incident 42"},
    ],
)
def test_good_params_are_accepted(conf: dict[str, Any]) -> None:
    out = validated(**conf)
    for key, value in conf.items():
        assert out[key] == value


def plan_for(params: dict[str, Any], **kwargs: Any) -> Any:
    run = {
        "airflow_run_id": "manual__2026-01-25T10:00:00+00:00",
        "run_type": "manual",
        "data_interval_end": dt.datetime(2026, 1, 25, 3, tzinfo=UTC),
        "logical_date": dt.datetime(2026, 1, 25, 10, tzinfo=UTC),
        "run_after": dt.datetime(2026, 1, 25, 10, tzinfo=UTC),
    }
    return make_plan(validated(**params), **{**run, **kwargs})


def test_force_promote_without_reason_is_refused() -> None:
    with pytest.raises(PlanError, match="force_promote requires a non-empty reason"):
        plan_for({"force_promote": True})
    with pytest.raises(PlanError, match="non-empty reason"):
        plan_for({"force_promote": True, "reason": "   "})


def test_force_promote_with_dry_run_is_refused() -> None:
    with pytest.raises(PlanError, match="contradict"):
        plan_for({"force_promote": True, "reason": "r", "dry_run": True})


@pytest.mark.parametrize("value", ["F,J\n", "F,J,J\n"])
def test_a_schedule_list_with_a_trailing_newline_is_refused(value: str) -> None:
    # the JSON-schema pattern is searched with Python's re ($ matches before a final newline):
    # the plan's check is a full match
    with pytest.raises((PlanError, ParamValidationError), match=r"schedule|pattern|valid"):
        plan_for({"schedule": value})


def test_explicit_schedule_must_match_epochs() -> None:
    with pytest.raises(PlanError, match="one setting per epoch"):
        plan_for({"schedule": "F,J", "epochs": 3})
    assert plan_for({"schedule": "F,J", "epochs": 2}).schedule == "F,J"


def test_the_steps_get_only_the_params_that_are_set_by_config_key() -> None:
    assert plan_for({}).config_params == {}
    assert plan_for({}).to_dict()["config_params"] == {}
    naive = plan_for({"warm_start": "none", "schedule": "joint", "epochs": 1, "min_hit": 0.1})
    assert naive.config_params == {
        "recipe.warm_start": "none",
        "recipe.schedule": "joint",
        "recipe.epochs": 1,
        "gate.min_save_hit_at_3": 0.1,
    }
    # an explicit list without epochs is fine: the list is the epoch count
    assert plan_for({"schedule": "F,J"}).config_params == {"recipe.schedule": "F,J"}


def test_plan_carries_validated_values() -> None:
    plan = plan_for({"window_end": "2026-01-24", "window_days": 5, "tolerance": 0.02, "reason": " why "})
    assert plan.window_end == "2026-01-24"
    assert plan.window_days == 5
    assert plan.tolerance == 0.02
    assert plan.reason == "why"
    assert plan.run_id == "manual__2026-01-25T10:00:00+00:00"
    assert plan.actor == "airflow:manual"


def test_scheduled_run_takes_the_window_end_from_the_data_interval() -> None:
    # interval [01-24 03:00, 01-25 03:00): the last complete day is 01-24
    end = resolve_window_end(
        requested=None,
        run_type="scheduled",
        data_interval_end=dt.datetime(2026, 1, 25, 3, tzinfo=UTC),
        logical_date=dt.datetime(2026, 1, 24, 3, tzinfo=UTC),
        run_after=dt.datetime(2026, 1, 25, 3, tzinfo=UTC),
    )
    assert end == dt.date(2026, 1, 24)


def test_manual_run_uses_the_param_and_never_the_data_interval() -> None:
    plan = plan_for(
        {"window_end": "2026-01-10"},
        data_interval_end=dt.datetime(2030, 1, 1, tzinfo=UTC),
    )
    assert plan.window_end == "2026-01-10"
    # without the param: the day before the logical date (the data interval is still ignored)
    plan = plan_for({}, data_interval_end=dt.datetime(2030, 1, 1, tzinfo=UTC))
    assert plan.window_end == "2026-01-24"


def test_manual_run_without_logical_date_uses_the_trigger_time() -> None:
    end = resolve_window_end(
        requested=None,
        run_type="manual",
        data_interval_end=None,
        logical_date=None,
        run_after=dt.datetime(2026, 3, 1, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    )
    # 00:30 at UTC+2 is 22:30 UTC on 02-28: the last complete UTC day is 02-27
    assert end == dt.date(2026, 2, 27)


def test_scheduled_run_without_interval_fails_clearly() -> None:
    with pytest.raises(PlanError, match="no data interval"):
        plan_for({}, run_type="scheduled", data_interval_end=None)


@pytest.mark.parametrize(
    ("airflow_run_id", "expected"),
    [
        ("scheduled__2026-01-25T03:00:00+00:00", "scheduled__2026-01-25T03:00:00+00:00"),
        ("manual run/../x", "manual_run_.._x"),
        ("__weird__", "weird"),
    ],
)
def test_ranker_run_id_uses_the_cli_alphabet(airflow_run_id: str, expected: str) -> None:
    assert ranker_run_id(airflow_run_id) == expected


def test_ranker_run_id_refuses_an_empty_result() -> None:
    with pytest.raises(PlanError):
        ranker_run_id("///")
