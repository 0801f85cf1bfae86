"""The ranker's Feast repository: definitions as data (features/repo/definitions.yaml) turned into
Feast objects whose file sources point at the workspace with ABSOLUTE paths (the duckdb offline
store resolves relative paths against the working directory, not the repo).

The store's config is generated into ``<home>/feast/feature_store.yaml``: offline store duckdb,
online store SQLite (``<home>/feast/online_store.db``) or Redis when ``$RANKER_ONLINE_STORE=redis``
(connection ``$RANKER_REDIS_URL``, default ``localhost:6379``). ``import feast`` is slow (~12 s):
everything that needs it imports it inside the function.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from features import sources
from features.derive import day_start
from features.schema import FEATURE_SERVICE
from ranking.core.atomic import atomic_write_json, atomic_write_text, read_json
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from feast import FeatureStore

DEFINITIONS = Path(__file__).parent / "repo" / "definitions.yaml"
_DTYPES = {"String", "Int64", "Float64", "Float32", "Int32", "Bool"}
_SOURCES = {"users": sources.USERS, "pins": sources.PINS}
_REDIS_URL = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+(:\d+)?(,[A-Za-z0-9_=.\-]+)*$")


class FeatureRepoError(RankerError):
    """The Feast repository definitions or the store configuration are invalid."""


@dataclass(frozen=True)
class ViewDef:
    name: str
    entity: str
    join_key: str
    source: str
    ttl_hours: float
    fields: dict[str, str]


@dataclass(frozen=True)
class RepoDef:
    project: str
    entities: dict[str, tuple[str, str, str]]  # name -> (join key, value type, description)
    views: tuple[ViewDef, ...]
    services: dict[str, tuple[str, ...]]


@cache
def load_definitions(path: Path = DEFINITIONS) -> RepoDef:
    """Parse and check definitions.yaml (every reference resolves, every dtype is known)."""
    raw = yaml.safe_load(path.read_text())
    try:
        entities = {
            e["name"]: (e["join_key"], e["value_type"], e.get("description", "")) for e in raw["entities"]
        }
        views = []
        for v in raw["feature_views"]:
            if v["entity"] not in entities:
                raise FeatureRepoError(f"{path}: view {v['name']} uses unknown entity {v['entity']!r}")
            if v["source"] not in _SOURCES:
                raise FeatureRepoError(f"{path}: view {v['name']} reads unknown source {v['source']!r}")
            bad = {t for t in v["fields"].values() if t not in _DTYPES}
            if bad:
                raise FeatureRepoError(f"{path}: view {v['name']} has unknown dtypes {sorted(bad)}")
            views.append(
                ViewDef(
                    name=v["name"],
                    entity=v["entity"],
                    join_key=entities[v["entity"]][0],
                    source=v["source"],
                    ttl_hours=float(v["ttl_hours"]),
                    fields=dict(v["fields"]),
                )
            )
        names = {v.name for v in views}
        services = {}
        for s in raw["feature_services"]:
            missing = set(s["feature_views"]) - names
            if missing:
                raise FeatureRepoError(f"{path}: service {s['name']} uses unknown views {sorted(missing)}")
            services[s["name"]] = tuple(s["feature_views"])
        return RepoDef(project=raw["project"], entities=entities, views=tuple(views), services=services)
    except (KeyError, TypeError) as exc:
        raise FeatureRepoError(f"{path}: malformed definitions ({exc!r})") from None


def feature_version(path: Path = DEFINITIONS) -> str:
    """Hash of the feature definitions: any change rebuilds every window partition."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def service_views(service: str = FEATURE_SERVICE) -> tuple[ViewDef, ...]:
    repo = load_definitions()
    if service not in repo.services:
        raise FeatureRepoError(f"unknown feature service {service!r}; defined: {sorted(repo.services)}")
    by_name = {v.name: v for v in repo.views}
    return tuple(by_name[n] for n in repo.services[service])


def online_store_config(ws: Workspace) -> dict[str, Any]:
    kind = os.environ.get("RANKER_ONLINE_STORE", "sqlite").strip().lower()
    if kind == "sqlite":
        return {"type": "sqlite", "path": str(ws.feast / "online_store.db")}
    if kind == "redis":
        url = os.environ.get("RANKER_REDIS_URL", "localhost:6379").removeprefix("redis://")
        if not _REDIS_URL.match(url):
            raise FeatureRepoError(f"RANKER_REDIS_URL is not host:port[,option=value...]: {url!r}")
        return {"type": "redis", "connection_string": url}
    raise FeatureRepoError(f"RANKER_ONLINE_STORE must be sqlite or redis, got {kind!r}")


def store_config_text(ws: Workspace) -> str:
    config = {
        "project": load_definitions().project,
        "provider": "local",
        "registry": {"registry_type": "file", "path": str(ws.feast / "registry.db")},
        "offline_store": {"type": "duckdb"},
        "online_store": online_store_config(ws),
        "entity_key_serialization_version": 3,
    }
    return "# generated by features/feast_repo.py from the workspace; do not edit\n" + yaml.safe_dump(
        config, sort_keys=True
    )


def write_store_config(ws: Workspace) -> Path:
    path = ws.feast / "feature_store.yaml"
    text = store_config_text(ws)
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def quiet_stdout() -> contextlib.AbstractContextManager[Any]:
    """Feast prints progress on stdout, which belongs to the one JSON summary: send it to stderr."""
    return contextlib.redirect_stdout(sys.stderr)


def open_store(ws: Workspace) -> FeatureStore:
    from feast import FeatureStore

    write_store_config(ws)
    return FeatureStore(repo_path=str(ws.feast))


def feast_objects(ws: Workspace) -> list[Any]:
    """Entities, file sources (absolute globs into the workspace), feature views, services."""
    from feast import Entity, FeatureService, FeatureView, Field, FileSource, ValueType
    from feast import types as ftypes
    from feast.data_format import ParquetFormat

    repo = load_definitions()
    entities = {
        name: Entity(name=name, join_keys=[key], value_type=ValueType[vtype], description=desc)
        for name, (key, vtype, desc) in repo.entities.items()
    }
    views = {}
    for v in repo.views:
        source = FileSource(
            name=f"{v.name}_source",
            path=sources.glob_pattern(ws, _SOURCES[v.source]),
            file_format=ParquetFormat(),
            timestamp_field="event_timestamp",
        )
        views[v.name] = FeatureView(
            name=v.name,
            entities=[entities[v.entity]],
            ttl=dt.timedelta(hours=v.ttl_hours),
            schema=[Field(name=f, dtype=getattr(ftypes, t)) for f, t in v.fields.items()],
            source=source,
            online=True,
        )
    services = [
        FeatureService(name=s, features=[views[n] for n in names]) for s, names in repo.services.items()
    ]
    return [*entities.values(), *views.values(), *services]


def apply(ws: Workspace) -> dict[str, Any]:
    started = time.perf_counter()
    store = open_store(ws)
    objects = feast_objects(ws)
    with quiet_stdout():
        store.apply(objects)
    atomic_write_json(ws.feast / "applied.json", {"feature_version": feature_version()})
    repo = load_definitions()
    return {
        "project": repo.project,
        "feature_store_yaml": str(ws.feast / "feature_store.yaml"),
        "online_store": online_store_config(ws)["type"],
        "entities": sorted(repo.entities),
        "feature_views": [v.name for v in repo.views],
        "feature_services": sorted(repo.services),
        "feature_version": feature_version(),
        "duration_seconds": round(time.perf_counter() - started, 3),
    }


def applied_version(ws: Workspace) -> str | None:
    """The feature version of the last successful `ranker features apply` (None: never applied)."""
    path = ws.feast / "applied.json"
    return str(read_json(path)["feature_version"]) if path.is_file() else None


def _registered_views(store: FeatureStore) -> dict[str, Any]:
    names = {v.name for v in load_definitions().views}
    views = {fv.name: fv for fv in store.list_feature_views() if fv.name in names}
    missing = names - set(views)
    if missing:
        raise FeatureRepoError(
            f"feature views {sorted(missing)} are not registered: run `ranker features apply`"
        )
    return views


def materialize(ws: Workspace, end: dt.date | None = None) -> dict[str, Any]:
    """Load the online store with the features as of the end of day ``end`` (default: the last
    snapshot). The first run materialises the whole range (a first `materialize-incremental` on
    historical data would load nothing and still record the interval); later runs go on
    incrementally from where the previous one stopped."""
    started = time.perf_counter()
    snapshot_days = sources.list_days(ws, sources.USERS)
    if not snapshot_days:
        raise RankerError(
            f"no feature snapshots in {ws.source}: run `ranker data synth` or `ranker data import`"
        )
    # the snapshot dated end+1 (00:00) holds everything up to the end of day `end`
    end_ts = day_start(end + dt.timedelta(days=1)) if end else day_start(snapshot_days[-1])
    store = open_store(ws)
    views = _registered_views(store)
    first = all(not fv.materialization_intervals for fv in views.values())
    if first:
        start_ts = day_start(snapshot_days[0])
        if end_ts < start_ts:
            raise RankerError(f"materialize end {end} is before the first snapshot {snapshot_days[0]}")
        with quiet_stdout():
            store.materialize(start_date=start_ts.to_pydatetime(), end_date=end_ts.to_pydatetime())
        mode = "full"
    else:
        start_ts = None
        with quiet_stdout():
            store.materialize_incremental(end_date=end_ts.to_pydatetime())
        mode = "incremental"
    return {
        "mode": mode,
        "start": start_ts.date().isoformat() if start_ts is not None else None,
        "end": (end or snapshot_days[-1] - dt.timedelta(days=1)).isoformat(),
        "end_timestamp": end_ts.isoformat(),
        "feature_views": sorted(views),
        "online_store": online_store_config(ws)["type"],
        "duration_seconds": round(time.perf_counter() - started, 3),
    }
