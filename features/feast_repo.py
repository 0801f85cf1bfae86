"""The ranker's Feast repository (``features/repo/``, a standard Feast feature repo) and the
workspace's Feast store.

``apply`` renders ``<home>/feast/feature_store.yaml`` from the repo's template — offline store
duckdb (default) or spark, online store SQLite (``<home>/feast/online_store.db``) or Redis — then
loads ``features/repo/definitions.py`` with ``RANKER_HOME=<home>`` and runs Feast's own total
apply on it (what ``feast apply`` does: add, update, delete). The store settings come from
``store_settings()``: the values its caller gives (the ``ranker`` steps pass the pipeline config's
``[features]`` section, whose environment layer is RANKER_OFFLINE_STORE, RANKER_ONLINE_STORE and
RANKER_REDIS_URL), else those variables (library callers and tests); every later ``open_store``
refuses a workspace whose rendered config no longer matches them (the registry's sources belong to
the applied offline store).

``import feast`` is slow (~12 s): everything that needs it imports it inside the function.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import importlib.util
import logging
import os
import re
import string
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, field_validator

from features import sources
from features.derive import day_start, derive_history
from features.schema import FEATURE_SERVICE, SNAPSHOT_TIME
from ranking.core.atomic import atomic_write_json, atomic_write_text, read_json
from ranking.core.errors import RankerError
from ranking.core.summaries import MaterializeSummary
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from feast import FeatureStore, FeatureView
    from feast.repo_contents import RepoContents

log = logging.getLogger(__name__)

REPO = Path(__file__).parent / "repo"  # definition files (*.py) and the feature_store.yaml template
OFFLINE_STORES = ("duckdb", "spark")
# offline_store = "duckdb": the template's store, Feast's DuckDB store reading only the snapshots that
# can serve a lookup (features/offline_store.py, which imports Feast; named here by its import path)
DAY_RANGE_DUCKDB = "features.offline_store.DayRangeDuckDBOfflineStore"
ONLINE_STORES = ("sqlite", "redis")
# a local Spark for one machine and for CI: 2 shuffle partitions (the default 200 is for a
# cluster), no UI, driver bound to loopback, UTC sessions (Feast compares timestamps as strings)
SPARK_LOCAL_CONF = {
    "spark.master": "local[*]",
    "spark.app.name": "ranker-feast",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Spark logs a FileNotFoundException stack trace at WARN for every glob path it reads
    "spark.log.level": "ERROR",
}
_REDIS_URL = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+(:\d+)?(,[A-Za-z0-9_=.\-]+)*$")


class FeatureRepoError(RankerError):
    """The Feast repository definitions or the store configuration are invalid."""


@dataclass(frozen=True)
class ViewDef:
    """A feature view as plain data (what the window builder needs without importing Feast)."""

    name: str
    entities: tuple[str, ...]  # one for user_stats and pin_stats, two for the history views
    join_keys: tuple[str, ...]
    ttl_hours: float
    fields: dict[str, str]  # feature -> Feast dtype name (String, Int64, Float64, ...)


@dataclass(frozen=True)
class StoreSettings:
    offline_store: str = "duckdb"  # duckdb | spark
    online_store: str = "sqlite"  # sqlite | redis
    redis_url: str = "localhost:6379"  # host:port[,option=value...] (online_store=redis)


def offline_store_name(store_type: str) -> str:
    """The ``[features] offline_store`` setting a rendered config's ``offline_store.type`` comes from."""
    return "duckdb" if store_type == DAY_RANGE_DUCKDB else store_type


def valid_redis_url(url: str) -> bool:
    """Whether ``url`` is ``host:port[,option=value...]`` (a leading ``redis://`` removed first)."""
    return bool(_REDIS_URL.match(url.removeprefix("redis://")))


def store_settings(
    offline_store: str | None = None, online_store: str | None = None, redis_url: str | None = None
) -> StoreSettings:
    """The Feast store settings: a value given here (the pipeline config's ``[features]``, which
    the ``ranker`` steps pass) wins over the environment (RANKER_OFFLINE_STORE,
    RANKER_ONLINE_STORE, RANKER_REDIS_URL), which wins over the defaults."""
    offline = (offline_store or os.environ.get("RANKER_OFFLINE_STORE") or "duckdb").strip().lower()
    if offline not in OFFLINE_STORES:
        raise FeatureRepoError(f"RANKER_OFFLINE_STORE must be duckdb or spark, got {offline!r}")
    online = (online_store or os.environ.get("RANKER_ONLINE_STORE") or "sqlite").strip().lower()
    if online not in ONLINE_STORES:
        raise FeatureRepoError(f"RANKER_ONLINE_STORE must be sqlite or redis, got {online!r}")
    url = (redis_url or os.environ.get("RANKER_REDIS_URL") or "localhost:6379").removeprefix("redis://")
    if not _REDIS_URL.match(url):
        raise FeatureRepoError(f"RANKER_REDIS_URL is not host:port[,option=value...]: {url!r}")
    return StoreSettings(offline_store=offline, online_store=online, redis_url=url)


def definition_files(repo: Path | None = None) -> list[Path]:
    """The repo's Python definition files, in a fixed order (what Feast loads and the version hashes)."""
    repo = repo or REPO
    return sorted(p for p in repo.rglob("*.py") if "__pycache__" not in p.parts)


def feature_version(repo: Path | None = None) -> str:
    """Hash of the definition files' content: any change rebuilds every window partition."""
    repo = repo or REPO
    h = hashlib.sha256()
    for path in definition_files(repo):
        h.update(path.relative_to(repo).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def render_store_config(template: str, home: Path, settings: StoreSettings) -> str:
    """feature_store.yaml for the workspace ``home``: the template with ${RANKER_HOME} substituted
    and the offline / online store blocks that ``settings`` select."""
    try:
        config = yaml.safe_load(string.Template(template).substitute(RANKER_HOME=str(home)))
    except (KeyError, ValueError, yaml.YAMLError) as exc:
        raise FeatureRepoError(f"the feature_store.yaml template is not usable ({exc})") from None
    if settings.offline_store == "spark":
        config["offline_store"] = {"type": "spark", "spark_conf": dict(SPARK_LOCAL_CONF)}
    if settings.online_store == "redis":
        config["online_store"] = {"type": "redis", "connection_string": settings.redis_url}
    header = "# rendered by `ranker features apply` from features/repo/feature_store.yaml; do not edit\n"
    return header + yaml.safe_dump(config, sort_keys=False)


def store_config_text(ws: Workspace, settings: StoreSettings | None = None) -> str:
    return render_store_config(
        (REPO / "feature_store.yaml").read_text(), ws.root, settings or store_settings()
    )


def _config_path(ws: Workspace) -> Path:
    return ws.feast / "feature_store.yaml"


def write_store_config(ws: Workspace, settings: StoreSettings | None = None) -> Path:
    """Render ``<home>/feast/feature_store.yaml`` (rewritten only when it changes)."""
    path = _config_path(ws)
    text = store_config_text(ws, settings)
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def quiet_stdout() -> contextlib.AbstractContextManager[Any]:
    """Feast prints progress on stdout, which belongs to the one JSON summary: send it to stderr."""
    return contextlib.redirect_stdout(sys.stderr)


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_repo(home: Path, repo: Path | None = None) -> RepoContents:
    """The Feast objects of the repo's definition files, loaded for the workspace ``home`` (as
    ``RANKER_HOME=<home> feast -c features/repo ...`` would). Each call executes the files afresh
    under a private module name: Feast's own loader imports them by file name and caches them."""
    from feast import Entity, FeatureService, FeatureView
    from feast.data_source import DataSource
    from feast.feature_view import DUMMY_ENTITY
    from feast.repo_contents import RepoContents

    contents = RepoContents(
        projects=[],
        data_sources=[],
        feature_views=[],
        on_demand_feature_views=[],
        stream_feature_views=[],
        label_views=[],
        entities=[],
        feature_services=[],
        permissions=[],
    )

    def add(items: list[Any], obj: Any) -> None:
        if not any(obj is other for other in items):
            items.append(obj)

    for i, path in enumerate(definition_files(repo)):
        spec = importlib.util.spec_from_file_location(f"_ranker_feast_repo_{i}_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        with _environ(RANKER_HOME=str(home)):
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                raise FeatureRepoError(f"{path}: {type(exc).__name__}: {exc}") from exc
        for obj in vars(module).values():
            if isinstance(obj, FeatureView):
                add(contents.feature_views, obj)
                if obj.batch_source is not None:
                    add(contents.data_sources, obj.batch_source)
            elif isinstance(obj, DataSource):
                add(contents.data_sources, obj)
            elif isinstance(obj, Entity):
                add(contents.entities, obj)
            elif isinstance(obj, FeatureService):
                add(contents.feature_services, obj)
    contents.entities.append(DUMMY_ENTITY)  # as Feast's parse_repo does (entity-less views)
    return contents


def describe_views(contents: RepoContents) -> list[ViewDef]:
    entities = {e.name: e.join_key for e in contents.entities}
    views = []
    for fv in contents.feature_views:
        if not fv.entities:
            raise FeatureRepoError(f"feature view {fv.name} must have an entity")
        views.append(
            ViewDef(
                name=fv.name,
                entities=tuple(fv.entities),
                join_keys=tuple(entities[e] for e in fv.entities),
                ttl_hours=(fv.ttl or dt.timedelta(0)).total_seconds() / 3600,
                fields={f.name: str(f.dtype) for f in fv.features},
            )
        )
    return views


def describe_services(contents: RepoContents) -> dict[str, list[str]]:
    return {s.name: [p.name for p in s.feature_view_projections] for s in contents.feature_services}


def _pick(views: list[ViewDef], services: dict[str, list[str]], service: str) -> tuple[ViewDef, ...]:
    if service not in services:
        raise FeatureRepoError(f"unknown feature service {service!r}; defined: {sorted(services)}")
    by_name = {v.name: v for v in views}
    return tuple(by_name[n] for n in services[service])


@cache
def _definitions() -> tuple[list[ViewDef], dict[str, list[str]]]:
    contents = load_repo(Workspace.resolve().root)
    return describe_views(contents), describe_services(contents)


def service_views(service: str = FEATURE_SERVICE, ws: Workspace | None = None) -> tuple[ViewDef, ...]:
    """The views of a feature service: as recorded by the workspace's last apply when ``ws`` is
    given (no Feast import; the caller checks the feature version), else from the definitions."""
    if ws is not None:
        record = _applied(ws)
        if record is None or record.views is None:
            raise RankerError(
                f"the Feast repository is not applied in {ws.feast}: run `ranker features apply`"
            )
        return _pick(record.views, record.services or {}, service)
    return _pick(*_definitions(), service)


class AppliedRecord(BaseModel):
    """``<home>/feast/applied.json``: what the last ``ranker features apply`` registered (the window
    reads the views from it without importing Feast). Older applies recorded less (None)."""

    model_config = ConfigDict(extra="ignore")

    feature_version: str
    offline_store: str | None = None
    online_store: str | None = None
    views: list[ViewDef] | None = None
    services: dict[str, list[str]] | None = None  # feature service -> its views

    @field_validator("views", mode="before")
    @classmethod
    def _one_entity_views(cls, raw: Any) -> Any:
        """Applies before the history views recorded one ``entity`` and ``join_key`` per view."""
        if not isinstance(raw, list):
            return raw
        return [
            {**v, "entities": [v["entity"]], "join_keys": [v["join_key"]]}
            if isinstance(v, dict) and "entities" not in v and "entity" in v
            else v
            for v in raw
        ]


class ApplySummary(BaseModel):
    """``ranker features apply``'s summary: the store rendered and what Feast registered."""

    model_config = ConfigDict(extra="forbid")

    project: str
    feature_store_yaml: str
    offline_store: str
    online_store: str
    entities: list[str]
    feature_views: list[str]
    feature_services: list[str]
    feature_version: str
    duration_seconds: float


def apply(ws: Workspace, settings: StoreSettings | None = None) -> ApplySummary:
    """``ranker features apply``: render the store config, then Feast's total apply of the repo."""
    from feast import FeatureStore, Project
    from feast.repo_operations import apply_total_with_repo_instance

    started = time.perf_counter()
    settings = settings or store_settings()
    # snapshots written before they carried their time (issue 30) get it, once
    upgraded = sources.add_snapshot_time(ws, SNAPSHOT_TIME)
    if upgraded:
        log.info("apply: added %s to %d snapshot files written before it existed", SNAPSHOT_TIME, upgraded)
    # and a workspace derived before the history views (issue 34) gets their snapshots, once
    derived = derive_history(ws)
    if derived:
        log.info(
            "apply: derived the history snapshots of %d days (%s..%s) written before they existed",
            len(derived),
            derived[0],
            derived[-1],
        )
    path = write_store_config(ws, settings)
    contents = load_repo(ws.root)
    store = FeatureStore(repo_path=str(ws.feast))
    # the project named in feature_store.yaml, as `feast apply` adds it (a total apply deletes
    # registered objects the repo does not hold, the project included)
    contents.projects.append(Project(name=store.project, description=store.config.project_description or ""))
    # no source validation: Feast's FileSource check does not expand globs (it only warns "does
    # not exist" for ours), and the Spark one starts a JVM; the window checks what it reads
    with quiet_stdout():
        apply_total_with_repo_instance(
            store, store.project, store.registry, contents, skip_source_validation=True
        )
    views, services = describe_views(contents), describe_services(contents)
    version = feature_version()
    applied = AppliedRecord(
        feature_version=version,
        offline_store=settings.offline_store,
        online_store=settings.online_store,
        views=views,
        services=services,
    )
    atomic_write_json(ws.feast / "applied.json", applied.model_dump(mode="json"))
    return ApplySummary(
        project=store.project,
        feature_store_yaml=str(path),
        offline_store=settings.offline_store,
        online_store=settings.online_store,
        entities=sorted(e.name for e in contents.entities if e.name != "__dummy"),
        feature_views=[v.name for v in views],
        feature_services=sorted(services),
        feature_version=version,
        duration_seconds=round(time.perf_counter() - started, 3),
    )


def _applied(ws: Workspace) -> AppliedRecord | None:
    path = ws.feast / "applied.json"
    if not path.is_file():
        return None
    return AppliedRecord.model_validate(read_json(path))


def applied_version(ws: Workspace) -> str | None:
    """The feature version of the last successful `ranker features apply` (None: never applied)."""
    record = _applied(ws)
    return record.feature_version if record else None


def open_store(ws: Workspace, settings: StoreSettings | None = None) -> FeatureStore:
    """The workspace's applied store. Settings that no longer render the applied config (another
    offline or online store, a moved workspace) are refused: the registry holds the sources the
    applied offline store reads, so only a new apply can switch."""
    from feast import FeatureStore

    path = _config_path(ws)
    if not path.is_file() or _applied(ws) is None:
        raise RankerError(f"the Feast repository is not applied in {ws.feast}: run `ranker features apply`")
    expected = store_config_text(ws, settings)
    current = path.read_text()
    if current != expected:
        now, want = yaml.safe_load(current) or {}, yaml.safe_load(expected)
        changed = sorted(k for k in set(now) | set(want) if now.get(k) != want.get(k))
        raise FeatureRepoError(
            f"the Feast store settings changed since the last apply ({', '.join(changed)} in {path}):"
            " run `ranker features apply`"
        )
    return FeatureStore(repo_path=str(ws.feast))


def _registered_views(ws: Workspace, store: FeatureStore) -> dict[str, FeatureView]:
    record = _applied(ws)
    names = {v.name for v in (record.views if record and record.views else [])}
    views = {fv.name: fv for fv in store.list_feature_views() if fv.name in names}
    missing = names - set(views)
    if missing or not names:
        raise FeatureRepoError(
            f"feature views {sorted(missing)} are not registered: run `ranker features apply`"
        )
    return views


def materialize(
    ws: Workspace, end: dt.date | None = None, settings: StoreSettings | None = None
) -> MaterializeSummary:
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
    store = open_store(ws, settings)
    views = _registered_views(ws, store)
    mode: Literal["full", "incremental"]
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
    return MaterializeSummary(
        mode=mode,
        start=start_ts.date() if start_ts is not None else None,
        end=end or snapshot_days[-1] - dt.timedelta(days=1),
        end_timestamp=end_ts.to_pydatetime(),
        feature_views=sorted(views),
        online_store=store.config.online_store.type,
        duration_seconds=round(time.perf_counter() - started, 3),
    )
