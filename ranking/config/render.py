"""Writing a config back as TOML (``ranker config show``, a backtest recipe's merged file).

``tomllib`` only reads; the config's values are scalars, strings and one level of sub-tables
(the optimizers), which this writes without a dependency.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ranking.config.loader import RawValue


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML config values must be finite: {value}")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML value")


def to_toml(sections: Mapping[str, Mapping[str, RawValue]], comments: Mapping[str, str] | None = None) -> str:
    """``{"recipe": {"epochs": 1, "table_optimizer": {...}}}`` -> TOML text. ``None`` values are
    written as comments (TOML has no null); ``comments`` maps dotted keys to a trailing comment."""
    comments = comments or {}
    out: list[str] = []
    for section, body in sections.items():
        out.append(f"[{section}]")
        tables = []
        for name, value in body.items():
            note = comments.get(f"{section}.{name}")
            suffix = f"  # {note}" if note else ""
            if isinstance(value, Mapping):
                tables.append((name, value, suffix))
            elif value is None:
                out.append(f"# {name} = (unset){suffix}")
            else:
                out.append(f"{name} = {toml_value(value)}{suffix}")
        for name, value, suffix in tables:
            out.append(f"[{section}.{name}]{suffix}")
            out.extend(f"{k} = {toml_value(v)}" for k, v in value.items() if v is not None)
        out.append("")
    return "\n".join(out)
