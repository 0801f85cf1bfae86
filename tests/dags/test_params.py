"""Run parameters of ranker_retrain: JSON-schema Params (checked when a run is created) and the run
plan's cross-field rules and window-end resolution (checked by the first task); the Params of
ranker_recipe_review against what `ranker review` takes (the project's own bounds, read from it)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from typing import Any

import pytest
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError
from airflow.serialization.serialized_objects import DagSerialization
from dag_test_paths import RANKER_BIN
from ranker_dags.one_step_tasks import review_args
from ranker_dags.params import (
    PARAM_KEYS,
    PlanError,
    config_bounds,
    make_plan,
    override_keys,
    ranker_run_id,
    resolve_window_end,
    retrain_param_schemas,
    retrain_params,
    review_params,
)
from ranker_recipe_review import ranker_recipe_review
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
        "overrides": None,
        "dry_run": False,
        "force_promote": False,
        "reason": "",
    }


@pytest.mark.parametrize(
    "conf",
    [
        {"window_days": 0},
        {"window_days": config_bounds()["window.days"]["maximum"] + 1},
        {"window_days": "20"},
        {"epochs": 0},
        {"epochs": config_bounds()["recipe.epochs"]["maximum"] + 1},
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
        {
            "window_days": config_bounds()["window.days"]["maximum"],
            "epochs": config_bounds()["recipe.epochs"]["maximum"],
        },
        {"schedule": "F,J,J"},
        {"schedule": "joint_then_frozen", "pipeline": "sync"},
        {"tolerance": 0.0, "min_hit": 0.2},
        {"warm_start": "none", "schedule": "joint", "epochs": 1},
        {"warm_start": "champion", "warm_start_scope": "dense"},
        {"force_promote": True, "reason": "hotfix for incident 42"},
        {"overrides": {"gate.allow_unfair": True, "reason": "champion trained a day later"}},
        {
            "overrides": {
                "validation.policy": {"label_rate_jump": "warn"},
                "gate.max_lift": 0.5,
                "reason": "r",
            }
        },
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


def test_a_param_of_a_config_key_takes_the_keys_own_limits() -> None:
    """Each limit is written once, in the config model: the Params read config_bounds.json, which
    `make schema` writes from it (tests/config/test_config_bounds.py checks it is fresh)."""
    schemas = retrain_param_schemas()
    for name, key in PARAM_KEYS.items():
        bounds = config_bounds()[key]
        for limit in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            assert schemas[name].get(limit) == bounds.get(limit), (name, limit)


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


# -- ranker_recipe_review ----------------------------------------------------------------------

REVIEW_PARAMS = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(ranker_recipe_review)).params
# what the project takes, asked of the project itself (this environment cannot import it): the
# [review] fields' JSON schema, the CLI's date range, and whether `ranker review` ARGV parses and
# its flags validate over a workspace's [review] (the defaults, and the largest min_days: a run's
# days must not depend on it)
PROJECT_SCRIPT = """
import json, sys
from pydantic import ValidationError
from ranking.cli.common import MAX_DATE, MIN_DATE
from ranking.cli.main import build_parser
from ranking.config.model import ReviewSection
from ranking.core.errors import RankerError

request = json.load(sys.stdin)
parser = build_parser()
bases = [ReviewSection(), ReviewSection(days=365, min_days=365)]

def accepts(argv):
    try:
        args = parser.parse_args([*argv, "--home", "/nonexistent"])
    except (RankerError, SystemExit):
        return False
    flags = {"days": args.days, "candidate_only": args.candidate_only}  # ranker review's overrides
    flags = {k: v for k, v in flags.items() if v is not None}
    try:
        for base in bases:
            ReviewSection.model_validate({**base.model_dump(), **flags})
    except ValidationError:
        return False
    return True

print(json.dumps({
    "fields": ReviewSection.model_json_schema()["properties"],
    "dates": [MIN_DATE.isoformat(), MAX_DATE.isoformat()],
    "accepted": [accepts(argv) for argv in request],
}))
"""
# JSON-schema keywords of a field's bounds the Param must repeat
BOUND_KEYWORDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
    "enum",
    "minLength",
    "maxLength",
)


def project(argvs: list[list[str]]) -> dict[str, Any]:
    python = RANKER_BIN.with_name("python")
    if not python.exists():
        pytest.skip(f"{python} is missing: run `make setup`")
    proc = subprocess.run(
        [str(python), "-c", PROJECT_SCRIPT],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def review_validated(**conf: Any) -> dict[str, Any] | None:
    """The review run's Params as both of Airflow's checks resolve them; None: refused."""
    try:
        at_creation = dict(REVIEW_PARAMS.deep_merge(conf).validate())
    except ParamValidationError:
        with pytest.raises(ParamValidationError):
            in_task = ParamsDict(review_params())
            in_task.update(conf)
            in_task.validate()
        return None
    in_task = ParamsDict(review_params())
    in_task.update(conf)
    assert in_task.validate() == at_creation
    return at_creation


def review_argv(params: dict[str, Any]) -> list[str]:
    """What the task runs for these Params (an empty end is the run's yesterday)."""
    return review_args(params["end"] or "2026-01-01", params["days"], bool(params["candidate_only"]))


def candidates(field: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(values the field takes, values past its bounds, values of another type), from its JSON schema."""
    if field["type"] == "boolean":
        return [True, False], [], ["true", 1, None]
    assert field["type"] == "integer", field
    low, high = field["minimum"], field["maximum"]
    return [low, high, (low + high) // 2], [low - 1, high + 1], [str(low), low + 0.5, True]


@pytest.fixture(scope="module")
def review_fields() -> dict[str, Any]:
    return project([])


def test_every_review_param_is_the_cli_end_or_a_review_config_key_with_its_bounds(
    review_fields: dict[str, Any],
) -> None:
    fields = review_fields["fields"]
    params = review_params()
    keys = set(params) - {"end"}
    assert keys and keys <= set(fields), keys - set(fields)
    for name in sorted(keys):
        schema, field = params[name].schema, fields[name]
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert field["type"] in types and set(types) <= {field["type"], "null"}, (name, types, field)
        for keyword in BOUND_KEYWORDS:
            assert schema.get(keyword) == field.get(keyword), (name, keyword, schema, field)


def test_review_params_take_what_ranker_review_takes_and_refuse_the_rest(
    review_fields: dict[str, Any],
) -> None:
    first, last = (dt.date.fromisoformat(d) for d in review_fields["dates"])
    day = dt.timedelta(days=1)
    takes: list[dict[str, Any]] = [{"end": first.isoformat()}, {"end": last.isoformat()}]
    past_bounds: list[dict[str, Any]] = [
        {"end": (first - day).isoformat()},
        {"end": (last + day).isoformat()},
        {"end": "2026-02-30"},
    ]
    other_types: list[dict[str, Any]] = [{"end": "20260101"}, {"end": 20260101}]
    for name in sorted(set(review_params()) - {"end"}):
        good, past, other = candidates(review_fields["fields"][name])
        takes += [{name: v} for v in good]
        past_bounds += [{name: v} for v in past]
        other_types += [{name: v} for v in other]
    # the run (days below the default min_days 7: a review that only reports), every Param
    takes += [{"days": 2, "candidate_only": True}, {"end": "2026-03-01", "days": 1, "candidate_only": True}]

    resolved = [review_validated(**conf) for conf in takes]
    assert None not in resolved, list(zip(takes, resolved, strict=True))
    assert [review_validated(**conf) for conf in past_bounds + other_types] == [None] * (
        len(past_bounds) + len(other_types)
    )
    unset = {"end": None, "days": None, "candidate_only": False}
    argvs = [review_argv(params) for params in resolved if params is not None]
    past_argvs = [review_argv({**unset, **conf}) for conf in past_bounds]
    accepted = project(argvs + past_argvs)["accepted"]
    assert accepted == [True] * len(argvs) + [False] * len(past_argvs), list(
        zip(argvs + past_argvs, accepted, strict=True)
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"gate.allow_unfair": True},  # no reason
        {"gate.allow_unfair": True, "reason": "   "},  # a blank one
        {"reason": "nothing overridden"},
        {"recipe.epochs": 3, "reason": "not a check"},  # a recipe key: its own Params
        {"gate.tolerance": 1.5, "reason": "r"},  # past the key's own limit
        {"validation.policy": {"label_rate_jump": "ignore"}, "reason": "r"},
        {"gate.nonsense": 1, "reason": "r"},
    ],
)
def test_an_override_without_a_reason_or_out_of_bounds_is_refused_when_the_run_is_created(
    overrides: dict[str, Any],
) -> None:
    with pytest.raises(ParamValidationError, match="overrides"):
        validated(overrides=overrides)


def test_overrides_reach_the_steps_by_config_key_with_their_reason() -> None:
    plan = plan_for(
        {
            "tolerance": 0.05,
            "epochs": 3,
            "overrides": {"gate.allow_unfair": True, "gate.tolerance": 0.2, "reason": " late champion "},
        }
    )
    assert plan.config_params == {"recipe.epochs": 3, "gate.tolerance": 0.2, "gate.allow_unfair": True}
    assert plan.override_reason == "late champion"
    assert plan.to_dict()["overrides"] == {"gate.allow_unfair": True, "gate.tolerance": 0.2}


def test_the_plan_refuses_an_override_without_a_reason_it_was_not_validated_for() -> None:
    # `airflow dags test` and old runs: the schema was not checked when the run was created
    run = {
        "airflow_run_id": "manual__x",
        "run_type": "manual",
        "data_interval_end": None,
        "logical_date": dt.datetime(2026, 1, 25, 10, tzinfo=UTC),
        "run_after": dt.datetime(2026, 1, 25, 10, tzinfo=UTC),
    }
    with pytest.raises(PlanError, match="overrides require a non-empty reason"):
        make_plan({"overrides": {"gate.allow_unfair": True}}, **run)
    with pytest.raises(PlanError, match="not a key a run may override"):
        make_plan({"overrides": {"recipe.epochs": 1, "reason": "r"}}, **run)


def test_every_gate_validation_and_heuristic_key_of_the_config_can_be_overridden() -> None:
    keys = set(override_keys())
    assert {"gate.allow_unfair", "gate.max_lift", "validation.policy", "heuristic.policy"} <= keys
    assert keys == {k for k in config_bounds() if k.split(".")[0] in ("gate", "validation", "heuristic")}
