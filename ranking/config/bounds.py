"""The config's bounds as plain JSON for the Airflow side, which cannot import ``ranking``: the
DAGs' Params read their limits from ``dags/ranker_dags/config_bounds.json``, written here from the
pydantic model (issue 33: a DAG Param allowed ``window_days`` up to 60 and ``epochs`` up to 10 while
the config allowed 365 and 20; each limit is now written once, in ``ranking/config/model.py``).

    python -m ranking.config.bounds           # (re)write the file (make schema runs it)
    python -m ranking.config.bounds --check   # exit 1 when the committed file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import JsonValue
from pydantic.json_schema import JsonSchemaValue  # pydantic's JSON Schema: its own free-form dict

from ranking.config.model import PipelineConfig

BOUNDS_FILE = Path(__file__).resolve().parents[2] / "dags" / "ranker_dags" / "config_bounds.json"
# what a JSON-Schema Param can take from a config key's schema
_KEPT = ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum", "pattern", "maxLength")


def _bounds(field: JsonSchemaValue) -> dict[str, JsonValue]:
    """A field's schema without its title, ``anyOf [X, null]`` read as X (a Param adds null itself)."""
    options = [o for o in field.get("anyOf", [field]) if o.get("type") != "null"]
    kept = {k: v for k, v in (options[0] if len(options) == 1 else field).items() if k in _KEPT}
    if "default" in field:
        kept["default"] = field["default"]
    return kept


def config_bounds() -> dict[str, dict[str, JsonValue]]:
    """``{"window.days": {"type": "integer", "minimum": 1, "maximum": 365, "default": 20}, ...}``
    for every key of every section: the file's JSON (nothing here reads it back; the DAGs' Params do)."""
    schema = PipelineConfig.model_json_schema()
    defs = schema["$defs"]
    found: dict[str, dict[str, JsonValue]] = {}
    for section, ref in sorted(schema["properties"].items()):
        model = defs[ref["$ref"].rsplit("/", 1)[-1]]
        for name, field in sorted(model["properties"].items()):
            found[f"{section}.{name}"] = _bounds(field)
    return found


def render() -> str:
    return json.dumps(config_bounds(), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale; write nothing")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        stale = not BOUNDS_FILE.is_file() or BOUNDS_FILE.read_text() != text
        if stale:
            print(f"{BOUNDS_FILE} is stale: run `make schema`", file=sys.stderr)
        return int(stale)
    from ranking.core.atomic import atomic_write_text

    atomic_write_text(BOUNDS_FILE, text)
    print(f"wrote {BOUNDS_FILE} ({len(config_bounds())} keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
