"""Where MLflow is and how long a call may wait for it: the ``[tracking]`` config as
:class:`TrackingSettings`.

The store defaults to a SQLite file in the workspace (``<home>/mlflow/mlflow.db``, artifacts in
``<home>/mlflow/artifacts``): tracking works with no server. ``uri`` (or
``$RANKER_MLFLOW_TRACKING_URI``, the stack's) points it at a server instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

# the [tracking] section's checks live with the config that runs them; re-exported for the callers
from ranking.config.tracking import (  # noqa: F401
    CREDENTIALS_REFUSED,
    MODEL_NAME,
    URI_SCHEMES,
    check_model_name,
    check_uri,
    local_path,
)

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.config.model import PipelineConfig, TrackingSection

URI_ENV = "RANKER_MLFLOW_TRACKING_URI"


class TrackingSettings(BaseModel):
    """Where runs go, where they wait when MLflow is down, and how long a call may take."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool
    home: Path
    """the workspace: the queue is <home>/mlflow/queue"""
    uri: str
    """the tracking (and registry) URI"""
    artifacts: str | None = None
    """where a local store's experiments keep their artifacts (None: the server decides)"""
    ui_url: str | None = None
    """the UI links point here (None: no links)"""
    model_name: str
    timeout_seconds: float

    @property
    def mlflow_dir(self) -> Path:
        return self.home / "mlflow"

    @property
    def queue_dir(self) -> Path:
        return self.mlflow_dir / "queue"

    @property
    def local(self) -> bool:
        """A store in files here (SQLite, a file store), not a server."""
        return not self.uri.startswith(("http://", "https://"))

    @property
    def store_lock(self) -> Path:
        """Serialises writers of a local store (backtest days run in parallel processes)."""
        return self.mlflow_dir / ".store.lock"

    def run_url(self, experiment_id: str, run_id: str) -> str | None:
        if not self.ui_url:
            return None
        return f"{self.ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"

    def model_url(self, version: str | int) -> str | None:
        if not self.ui_url:
            return None
        return f"{self.ui_url.rstrip('/')}/#/models/{self.model_name}/versions/{version}"


def local_store(home: Path) -> tuple[str, str]:
    """The default store of a workspace: (tracking URI, artifact root)."""
    root = home.resolve() / "mlflow"
    return f"sqlite:///{root / 'mlflow.db'}", str(root / "artifacts")


def tracking_settings(
    home: Path, config: PipelineConfig | EffectiveConfig | TrackingSection | None = None
) -> TrackingSettings:
    """The settings of a workspace from its ``[tracking]`` section (None: the defaults, with
    ``$RANKER_MLFLOW_TRACKING_URI`` read as the loader's environment layer would)."""
    import os

    from ranking.config.loader import EffectiveConfig
    from ranking.config.model import PipelineConfig, TrackingSection

    if isinstance(config, EffectiveConfig):
        config = config.config
    if isinstance(config, PipelineConfig):
        section = config.tracking
    elif config is None:
        env = os.environ.get(URI_ENV) or None
        section = TrackingSection(uri=env) if env else TrackingSection()
    else:
        section = config
    home = home.resolve()
    artifacts: str | None
    if section.uri is None:
        uri, artifacts = local_store(home)
    else:
        uri = section.uri
        artifacts = str(Path(local_path(uri)).parent / "artifacts") if uri.startswith("sqlite:") else None
    ui_url = section.ui_url or (uri if uri.startswith(("http://", "https://")) else None)
    return TrackingSettings(
        enabled=section.enabled,
        home=home,
        uri=uri,
        artifacts=artifacts,
        ui_url=ui_url,
        model_name=section.model_name,
        timeout_seconds=section.timeout_seconds,
    )
