"""Model registry: immutable versions, ``champion`` and ``base`` aliases with append-only histories, rollback.

Modules: ``storage`` (local / fsspec file operations), ``records`` (version records, alias events,
who/when), ``aliases`` (the alias: exclusive-create events, compare-and-swap, rollback target),
``blessing`` (whether a gate verdict blesses a promotion; version status), ``registry`` (the
``Registry`` facade and the trainer's interface), ``operations`` (the `ranker` registry commands).
"""

from ranking.registry.aliases import BASE, CHAMPION, AliasConflict
from ranking.registry.blessing import blessing_problem
from ranking.registry.records import ACTOR_ENV, AliasEvent, VersionRecord, current_actor, training_window
from ranking.registry.registry import (
    REGISTRY_ENV,
    Registry,
    alias_checkpoint,
    cache_dir,
    champion_checkpoint,
    register_run,
    registry_url,
    validate_version_id,
)

__all__ = [
    "ACTOR_ENV",
    "BASE",
    "CHAMPION",
    "REGISTRY_ENV",
    "AliasConflict",
    "AliasEvent",
    "Registry",
    "VersionRecord",
    "alias_checkpoint",
    "blessing_problem",
    "cache_dir",
    "champion_checkpoint",
    "current_actor",
    "register_run",
    "registry_url",
    "training_window",
    "validate_version_id",
]
