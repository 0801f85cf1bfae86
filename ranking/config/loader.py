"""Finding, reading and layering pipeline config files; one-line errors that name the key.

Layers, lowest first: built-in defaults < environment (``$RANKER_PUSHGATEWAY_URL``,
``$RANKER_MAX_SOURCE_LAG_HOURS``, ``$RANKER_OFFLINE_STORE``, ``$RANKER_ONLINE_STORE``,
``$RANKER_REDIS_URL``, ``$RANKER_MLFLOW_TRACKING_URI``: deployment-wide settings that predate the
file) < config file < CLI flags
< DAG Params (``--params``). Each effective value remembers the layer it came from.

The file is TOML (primary: ``tomllib`` is in the standard library and TOML's types are explicit,
so ``1e-3`` is a number and ``no`` is not a boolean, as YAML 1.1 would have it); YAML is read too
when the file ends in ``.yaml``/``.yml``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from ranking.config.model import PATH_KEYS, RECIPE_NAME, SECTIONS, PipelineConfig, leaf_keys
from ranking.config.tracking import CREDENTIALS_REFUSED
from ranking.core.errors import RankerError
from ranking.trainer.schedule import NAMED_SCHEDULES

CONFIG_ENV = "RANKER_CONFIG"
MAX_ERRORS_SHOWN = 5
CONFIG_NAMES = ("ranker.toml", "ranker.yaml", "ranker.yml")
# the environment variables a config key reads when neither the file nor a flag sets it
ENV_KEYS: dict[str, str] = {
    "metrics.pushgateway": "RANKER_PUSHGATEWAY_URL",
    "window.max_source_lag_hours": "RANKER_MAX_SOURCE_LAG_HOURS",
    "features.offline_store": "RANKER_OFFLINE_STORE",
    "features.online_store": "RANKER_ONLINE_STORE",
    "features.redis_url": "RANKER_REDIS_URL",
    "tracking.uri": "RANKER_MLFLOW_TRACKING_URI",
}
# store names read from the environment are case-insensitive (as feast_repo.store_settings reads them)
_LOWERCASE_ENV_KEYS = ("features.offline_store", "features.online_store")
# A value as a person wrote it, before the config model validates it: what TOML (dates and times
# included), YAML, a --params JSON object, an environment variable or a flag can hold.
RawValue: TypeAlias = (
    str
    | int
    | float
    | bool
    | dt.datetime
    | dt.date
    | dt.time
    | list["RawValue"]
    | dict[str, "RawValue"]
    | None
)
DEFAULT = "default"
FLAG = "flag"
PARAM = "param"


class ConfigFileError(RankerError):
    """The pipeline config cannot be read or is invalid (one line, naming the key)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"config error: {message}")


@dataclass(frozen=True)
class Layer:
    """Values of one origin, by dotted key (``{"recipe.epochs": 1}``)."""

    source: str  # default | env:VAR | file:PATH | flag | param
    values: Mapping[str, RawValue] = field(default_factory=dict)


@dataclass(frozen=True)
class EffectiveConfig:
    config: PipelineConfig
    sources: Mapping[str, str]  # dotted key -> the layer its value came from
    files: tuple[str, ...] = ()

    def value(self, key: str) -> Any:
        section, name = key.split(".")
        return getattr(getattr(self.config, section), name)

    def record(self) -> EffectiveConfigRecord:
        return EffectiveConfigRecord(
            config=self.config, sources=dict(sorted(self.sources.items())), files=list(self.files)
        )

    def to_dict(self) -> dict[str, JsonValue]:
        """What is recorded beside a run (``effective_config.json``) and printed by ``config show``."""
        return self.record().model_dump(mode="json")


class EffectiveConfigRecord(BaseModel):
    """``effective_config.json``: the validated config, each key's source layer and the files read."""

    model_config = ConfigDict(extra="forbid")

    config: PipelineConfig
    sources: dict[str, str]  # dotted key -> the layer its value came from, sorted by key
    files: list[str]


def find_config_file(
    home: Path, explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """``--config FILE``, else ``$RANKER_CONFIG``, else ``<home>/ranker.toml`` (or ``.yaml``)."""
    environ = os.environ if environ is None else environ
    chosen = explicit if explicit is not None else (environ.get(CONFIG_ENV) or None)
    if chosen is not None:
        path = Path(chosen).expanduser().resolve()
        if not path.is_file():
            what = "--config" if explicit is not None else f"${CONFIG_ENV}"
            raise ConfigFileError(f"{what}: no config file at {path}")
        return path
    found = [home / name for name in CONFIG_NAMES if (home / name).is_file()]
    if len(found) > 1:
        raise ConfigFileError(
            f"{home} holds {len(found)} config files ({', '.join(p.name for p in found)}): keep one"
        )
    return found[0] if found else None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def parse_file(path: Path) -> dict[str, RawValue]:
    """The file's sections as a nested dict (no validation yet)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path}: not UTF-8 text") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.load(text, Loader=_unique_keys_loader())  # a SafeLoader subclass
        except yaml.YAMLError as exc:
            raise ConfigFileError(f"{path}: not valid YAML: {_one_line(str(exc))}") from None
        except RecursionError:
            raise ConfigFileError(f"{path}: nested too deeply") from None
        raw = {} if raw is None else raw
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigFileError(f"{path}: not valid TOML: {_one_line(str(exc))}") from None
        except RecursionError:
            raise ConfigFileError(f"{path}: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ConfigFileError(f"{path}: must hold sections ({', '.join(SECTIONS)})")
    return raw


def _unique_keys_loader() -> Any:
    """A YAML SafeLoader that refuses a key given twice in one mapping (TOML refuses it too; YAML
    would keep the last silently, so a pasted second `tolerance:` changed the gate unseen)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def file_values(path: Path, raw: Mapping[str, RawValue] | None = None) -> dict[str, RawValue]:
    """Dotted values of a config file; relative paths are taken relative to the file's folder."""
    raw = parse_file(path) if raw is None else raw
    source = f"file:{path}"
    values: dict[str, RawValue] = {}
    for section, body in raw.items():
        if section not in SECTIONS:
            raise ConfigFileError(f"{section}: unknown section (known: {', '.join(SECTIONS)}) [{source}]")
        if not isinstance(body, dict):
            raise ConfigFileError(f"{section}: must be a table of keys [{source}]")
        for name, value in body.items():
            values[f"{section}.{name}"] = value
    for key in PATH_KEYS:
        value = values.get(key)
        if isinstance(value, str) and value and not _is_keyword(key, value):
            values[key] = str((path.parent / Path(value).expanduser()).resolve())
    return values


def _is_keyword(key: str, value: str) -> bool:
    from ranking.config.model import WARM_START_SOURCES

    return key in ("recipe.warm_start", "recipe.full_retrain_warm_start") and value in WARM_START_SOURCES


def env_values(environ: Mapping[str, str] | None = None) -> dict[str, RawValue]:
    environ = os.environ if environ is None else environ
    values: dict[str, RawValue] = {}
    for key, var in ENV_KEYS.items():
        raw = environ.get(var, "").strip()
        if not raw:
            continue
        if key == "window.max_source_lag_hours":
            try:
                values[key] = float(raw)
            except ValueError:
                raise ConfigFileError(f"{key}: must be a number (got {raw!r} from env:{var})") from None
        elif key in _LOWERCASE_ENV_KEYS:
            values[key] = raw.lower()
        else:
            values[key] = raw
    return values


def resolve(layers: list[Layer], files: tuple[str, ...] = ()) -> EffectiveConfig:
    """Merge the layers (later wins), validate, and record each value's source."""
    merged: dict[str, RawValue] = {}
    sources = dict.fromkeys(leaf_keys(), DEFAULT)
    rank = dict.fromkeys(leaf_keys(), -1)
    for i, layer in enumerate(layers):
        for key, value in layer.values.items():
            merged[key] = value
            sources[key] = layer.source
            rank[key] = i
    # an explicit schedule list set above the layer that set epochs carries its own epoch count
    schedule = merged.get("recipe.schedule")
    explicit_list = isinstance(schedule, str) and schedule not in NAMED_SCHEDULES
    if explicit_list and "recipe.epochs" in merged and rank["recipe.epochs"] < rank["recipe.schedule"]:
        del merged["recipe.epochs"]
        sources["recipe.epochs"] = DEFAULT
    nested: dict[str, dict[str, RawValue]] = {}
    for key, value in merged.items():
        section, _, name = key.partition(".")
        nested.setdefault(section, {})[name] = value
    try:
        config = PipelineConfig.model_validate(nested)
    except ValidationError as exc:
        raise ConfigFileError(format_errors(exc, sources)) from None
    return EffectiveConfig(config, {k: sources[k] for k in leaf_keys()}, files)


def parse_params(text: str | None) -> dict[str, RawValue]:
    """``--params '{"recipe.epochs": 2}'``: a JSON object of dotted config keys (null = not set)."""
    if not text:
        return {}
    try:
        raw = json.loads(text, parse_constant=lambda c: float(c))
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"--params: not a JSON object: {exc.msg}") from None
    except RecursionError:
        raise ConfigFileError("--params: nested too deeply (a JSON object of dotted config keys)") from None
    if not isinstance(raw, dict):
        raise ConfigFileError("--params: must be a JSON object of dotted config keys")
    known = set(leaf_keys())
    unknown = sorted(k for k in raw if k not in known and k.split(".")[0] not in SECTIONS)
    if unknown:
        raise ConfigFileError(
            f"{_one_line(unknown[0])[:80]}: unknown section (known: {', '.join(SECTIONS)}) [{PARAM}]"
        )
    return {k: v for k, v in raw.items() if v is not None}


def load(
    home: Path,
    explicit: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, RawValue] | None = None,
    override_source: str = FLAG,
    environ: Mapping[str, str] | None = None,
    params: Mapping[str, RawValue] | None = None,
) -> EffectiveConfig:
    """The effective config of a command: defaults < env < file < ``overrides`` (flags) <
    ``params`` (a DAG run's Params: the operator's choice for this run)."""
    layers = [Layer(f"env:{ENV_KEYS[k]}", {k: v}) for k, v in env_values(environ).items()]
    path = find_config_file(home, explicit, environ)
    files: tuple[str, ...] = ()
    if path is not None:
        layers.append(Layer(f"file:{path}", file_values(path)))
        files = (str(path),)
    wanted = [layer.values["review.recipe"] for layer in layers if "review.recipe" in layer.values]
    for later in (overrides, params):
        if later and "review.recipe" in later:
            wanted.append(later["review.recipe"])
    if wanted and wanted[-1] == "auto":
        # above the file, below flags and Params: an operator's explicit choice still wins
        reviewed = auto_recipe_layer(home)
        if reviewed is not None:
            layers.append(reviewed)
    if overrides:
        layers.append(Layer(override_source, dict(overrides)))
    if params:
        layers.append(Layer(PARAM, dict(params)))
    return resolve(layers, files)


# ------------------------------------------------------------------ review = "auto"

AUTO_RECIPE_FILE = Path("reviews") / "recipe.json"
# what a reviewed recipe may set: how the daily model is trained, and its base model
AUTO_RECIPE_SECTIONS = ("recipe", "pretrain")


def auto_recipe_layer(home: Path) -> Layer | None:
    """``review.recipe = "auto"``: the recipe the last review switched to (written by ``ranker
    review``; ranking/review/switch.py), as a layer whose source names that review and recipe;
    None before any review switched."""
    path = Path(home) / AUTO_RECIPE_FILE
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigFileError(f"{path}: cannot read the reviewed recipe: {exc}") from None
    values = state.get("values") if isinstance(state, dict) else None
    review, recipe = (
        (state.get("review_id"), state.get("recipe")) if isinstance(state, dict) else (None, None)
    )
    if not isinstance(values, dict) or not isinstance(review, str) or not isinstance(recipe, str):
        raise ConfigFileError(f"{path}: not a reviewed recipe (recipe, review_id, values)")
    problem = reviewed_recipe_problem(recipe, review)
    if problem:
        raise ConfigFileError(f"{path}: {problem}")
    known = set(leaf_keys())
    for key in values:
        if key not in known or key.split(".")[0] not in AUTO_RECIPE_SECTIONS:
            raise ConfigFileError(
                f"{path}: {key}: a reviewed recipe sets only {', '.join(AUTO_RECIPE_SECTIONS)}"
            )
    return Layer(f"review:{review}:{recipe}", values)


def reviewed_recipe_problem(recipe: str, review_id: str) -> str | None:
    """What is wrong with a reviewed recipe's name and review id (they reach the config's source
    labels and ``ranker config show``'s output: a newline there would forge a line), or None."""
    if not RECIPE_NAME.match(recipe):
        return f"recipe {recipe!r} is not a recipe name (letters, digits, _.+-)"
    try:
        dt.date.fromisoformat(review_id)
    except ValueError:
        return f"review_id {review_id!r} is not a review id (a date YYYY-MM-DD)"
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", review_id, re.ASCII):
        return f"review_id {review_id!r} is not a review id (a date YYYY-MM-DD)"
    return None


# ------------------------------------------------------------------ error messages


def _cut(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters: a 100 kB value or key made a 100 kB error line."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _show(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return _cut(json.dumps(value))
    return _cut(_one_line(repr(value)))


_KNOWN_TYPES = {
    "greater_than_equal": lambda c: f"must be >= {c['ge']}",
    "greater_than": lambda c: f"must be > {c['gt']}",
    "less_than_equal": lambda c: f"must be <= {c['le']}",
    "less_than": lambda c: f"must be < {c['lt']}",
    "finite_number": lambda c: "must be a finite number",
    "int_type": lambda c: "must be an integer",
    "int_from_float": lambda c: "must be an integer",
    "float_type": lambda c: "must be a number",
    "bool_type": lambda c: "must be true or false",
    "string_type": lambda c: "must be a string",
    "string_too_long": lambda c: f"must be at most {c['max_length']:,} characters",
    "too_long": lambda c: f"must hold at most {c['max_length']:,} items",
    "literal_error": lambda c: f"must be one of {c['expected']}",
    "model_type": lambda c: "must be a table of keys",
    "dict_type": lambda c: "must be a table of keys",
}


def format_errors(exc: ValidationError, sources: Mapping[str, str]) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = [_cut(str(p)) for p in err["loc"]]
        key = ".".join(loc)
        origin = sources.get(".".join(loc[:2]))
        kind = err["type"]
        if kind == "extra_forbidden":
            section = loc[0]
            known = ", ".join(SECTIONS[section].model_fields) if section in SECTIONS and len(loc) == 2 else ""
            message = "unknown key" + (f" (known: {known})" if known else "")
        elif kind == "missing":
            message = "is required"
        else:
            ctx = err.get("ctx") or {}
            render = _KNOWN_TYPES.get(kind)
            message = render(ctx) if render else _cut(str(err["msg"]).removeprefix("Value error, "), 120)
            if not message.startswith(CREDENTIALS_REFUSED):  # a refused password is not echoed
                message += f" (got {_show(err.get('input'))})"
        if origin and origin != DEFAULT:
            message += f" [{origin}]"
        parts.append(f"{key}: {message}")
    # one line a person reads: 5,000 unknown keys made a 1.3 MB one
    shown = parts[:MAX_ERRORS_SHOWN]
    more = len(parts) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


__all__ = [
    "CONFIG_ENV",
    "ConfigFileError",
    "EffectiveConfig",
    "Layer",
    "file_values",
    "find_config_file",
    "load",
    "resolve",
]
