"""JSON as the ``ranker`` steps print it and the tasks hand it on as XCom: every value typed as
JSON, none as ``Any`` (the DAG's environment does not import the project's summary models)."""

from __future__ import annotations

from typing import TypeAlias

Json: TypeAlias = "str | int | float | bool | list[Json] | dict[str, Json] | None"
Summary: TypeAlias = "dict[str, Json]"  # one step's printed JSON object
Schema: TypeAlias = "dict[str, Json]"  # a JSON schema (a Param's, a config key's bounds)


def as_object(value: Json) -> Summary:
    """``value`` when it is a JSON object, else an empty one (a missing or null field)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Json) -> list[Json]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []
