"""The project registry's champion mirrored in MLflow's model registry (filled in next)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ranking.tracking.queue import ChampionItem, DeleteItem
    from ranking.tracking.settings import TrackingSettings


def send_champion(item: ChampionItem, settings: TrackingSettings) -> str:
    raise NotImplementedError


def send_deletions(item: DeleteItem, settings: TrackingSettings) -> str:
    raise NotImplementedError
