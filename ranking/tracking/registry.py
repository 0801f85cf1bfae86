"""The project registry's champion mirrored in MLflow's model registry.

The project registry (``ranking.registry``) stays the source of truth. Each promoted version is
registered as a version of the registered model ``[tracking] model_name`` (tag ``ranker.version``,
source: its folder in the project registry, run: its training run's MLflow run when that was
tracked), and the alias ``champion`` follows the project's champion. What is sent is always what
the project registry says at that moment, so a replayed event never moves the alias back to a
stale version.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.tracking.client import bounded_calls, find_run, mlflow_client, store_lock
from ranking.tracking.queue import ChampionItem, DeleteItem
from ranking.tracking.settings import TrackingSettings

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from ranking.registry import Registry

log = logging.getLogger(__name__)

CHAMPION_ALIAS = "champion"
VERSION_TAG = "ranker.version"
SOURCE_TAG = "ranker.source"
# the record ids of a training: "<kind>:<run folder name>" (ranking/tracking/builders.py)
TRAINING_RECORD_PREFIXES = ("train", "retrain", "pretrain")


def version_source(registry_url: str, version: str) -> str:
    return f"{registry_url.rstrip('/')}/versions/{version}"


def _all_experiments(client: MlflowClient) -> list[str]:
    return [e.experiment_id for e in client.search_experiments()]


def mlflow_version(client: MlflowClient, model_name: str, version: str) -> str | None:
    """The MLflow model version number mirroring the project's ``version`` (None: not mirrored)."""
    found = client.search_model_versions(f"name = '{model_name}' and tags.`{VERSION_TAG}` = '{version}'")
    return str(min(int(v.version) for v in found)) if found else None


def training_records(run_folder: str) -> list[str]:
    """The record ids a run folder's training can have been tracked under: ``ranker train`` on its
    own, a pipeline run, a pretrain (each names its run folder after its run id). Exact ids, so a
    server shared by several workspaces, whose versions repeat (v0001 in each), links the right run."""
    return [f"{prefix}:{run_folder}" for prefix in TRAINING_RECORD_PREFIXES]


def training_run_id(client: MlflowClient, reg: Registry, version: str) -> str | None:
    """The MLflow run that trained ``version``, when it was tracked."""
    run_dir = Path(reg.record(version).source_run_dir).name
    experiments = _all_experiments(client)
    for record_id in training_records(run_dir):
        run = find_run(client, experiments, record_id)
        if run is not None:
            return run.info.run_id
    return None


def ensure_version(client: MlflowClient, reg: Registry, version: str, settings: TrackingSettings) -> str:
    """Register ``version`` (once) and return its MLflow version number."""
    from mlflow.exceptions import MlflowException

    found = mlflow_version(client, settings.model_name, version)
    if found is not None:
        return found
    source = version_source(reg.url, version)
    run_id = training_run_id(client, reg, version)
    tags = {VERSION_TAG: version, SOURCE_TAG: source}
    try:
        created = client.create_model_version(settings.model_name, source, run_id=run_id, tags=tags)
    except MlflowException as exc:
        # a server accepts a local folder as a source only inside the run's artifacts: point at
        # the run instead (the folder stays in the ranker.source tag)
        if exc.error_code != "INVALID_PARAMETER_VALUE" or "source" not in str(exc):
            raise
        fallback = f"runs:/{run_id}/" if run_id else f"ranker-registry:{source}"
        created = client.create_model_version(settings.model_name, fallback, run_id=run_id, tags=tags)
    return str(created.version)


def _ensure_model(client: MlflowClient, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        try:
            client.create_registered_model(
                name, description="the ranker's versions; alias champion follows the project registry"
            )
        except MlflowException as again:
            if again.error_code != "RESOURCE_ALREADY_EXISTS":
                raise


def send_champion(item: ChampionItem, settings: TrackingSettings) -> str:
    """Register ``item.versions`` and the project's champion now, and point the alias at the
    champion (raises on MLflow trouble; a queue item's delivery)."""
    from ranking.registry import Registry

    reg = Registry(item.registry)
    champion = reg.champion()
    wanted = list(dict.fromkeys([*item.versions, *([champion] if champion else [])]))
    with bounded_calls(settings), store_lock(settings):
        client = mlflow_client(settings)
        _ensure_model(client, settings.model_name)
        numbers = {v: ensure_version(client, reg, v, settings) for v in wanted}
        if champion is None:
            aliases = client.get_registered_model(settings.model_name).aliases
            if CHAMPION_ALIAS in aliases:
                client.delete_registered_model_alias(settings.model_name, CHAMPION_ALIAS)
            return f"no champion: alias {CHAMPION_ALIAS} removed ({len(numbers)} version(s) registered)"
        client.set_registered_model_alias(settings.model_name, CHAMPION_ALIAS, numbers[champion])
    return f"{settings.model_name}@{CHAMPION_ALIAS} -> version {numbers[champion]} ({champion})"


def send_deletions(item: DeleteItem, settings: TrackingSettings) -> str:
    """Delete the runs of ``item.record_ids`` (MLflow's soft delete) and the model versions of
    ``item.versions`` (raises on MLflow trouble)."""
    from mlflow.exceptions import MlflowException

    runs = versions = 0
    with bounded_calls(settings), store_lock(settings):
        client = mlflow_client(settings)
        experiments = _all_experiments(client)
        for record_id in item.record_ids:
            while (run := find_run(client, experiments, record_id)) is not None:
                client.delete_run(run.info.run_id)
                runs += 1
        for version in item.versions:
            try:
                number = mlflow_version(client, settings.model_name, version)
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                    raise
                number = None
            if number is not None:
                client.delete_model_version(settings.model_name, number)
                versions += 1
    return f"deleted {runs} MLflow run(s), {versions} model version(s)"


def sync(registry_url: str, settings: TrackingSettings) -> str:
    """``ranker tracking sync``: register every version that was ever champion and point the
    alias at the champion now (raises on MLflow trouble)."""
    from ranking.registry import Registry

    reg = Registry(registry_url)
    ever = [e.to_version for e in reg.history() if reg.is_complete(e.to_version)]
    return send_champion(ChampionItem(registry=registry_url, versions=list(dict.fromkeys(ever))), settings)
