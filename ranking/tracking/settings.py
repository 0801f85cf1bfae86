"""Where MLflow is and how long a call may wait for it: the ``[tracking]`` config as
:class:`TrackingSettings`.

The store defaults to a SQLite file in the workspace (``<home>/mlflow/mlflow.db``, artifacts in
``<home>/mlflow/artifacts``): tracking works with no server. ``uri`` (or
``$RANKER_MLFLOW_TRACKING_URI``, the stack's) points it at a server instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.config.model import PipelineConfig, TrackingSection

URI_ENV = "RANKER_MLFLOW_TRACKING_URI"
# a registered model's name reaches URLs (models:/<name>@champion) and the UI's paths
MODEL_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z", re.ASCII)
CREDENTIALS_REFUSED = "must not hold credentials"
URI_SCHEMES = ("sqlite:///", "file:", "http://", "https://")


def check_uri(uri: str) -> str:
    """The URI as given when MLflow can use it as our tracking store; ValueError (one line) else.

    sqlite:///<path> and file:<path> (local stores) and http(s)://host[:port][/path] (a server).
    A URL with credentials is refused: it would be written into run folders, summaries and logs
    (a server's credentials go in MLflow's own $MLFLOW_TRACKING_USERNAME / _PASSWORD)."""
    if any(ord(c) < 33 for c in uri):
        raise ValueError("must not hold spaces or control characters")
    if uri.startswith(("http://", "https://")):
        parts = urlsplit(uri)
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise ValueError(
                f"{CREDENTIALS_REFUSED} (user:password@): set $MLFLOW_TRACKING_USERNAME and"
                " $MLFLOW_TRACKING_PASSWORD instead"
            )
        try:
            port = parts.port
        except ValueError:
            raise ValueError("has an invalid port") from None
        if not parts.hostname or (port is not None and not 0 < port < 65536):
            raise ValueError("must be http(s)://host[:port][/path]")
        if parts.query or parts.fragment:
            raise ValueError("must not hold a query or a fragment")
        return uri
    if uri.startswith("sqlite:///"):
        if len(uri) == len("sqlite:///") or uri.endswith("/"):
            raise ValueError("must be sqlite:///<path of the database file>")
        return uri
    if uri.startswith("file:"):
        if not local_path(uri).strip("/"):
            raise ValueError("must be file:<folder>")
        return uri
    raise ValueError(f"must start with {', '.join(URI_SCHEMES)} (an MLflow tracking URI)")


def check_model_name(name: str) -> str:
    if not MODEL_NAME.match(name):
        raise ValueError(f"{name[:60]!r} is not a model name (letters, digits, _ . -; <= 100)")
    return name


def local_path(uri: str) -> str:
    """The filesystem path of a sqlite:/// or file: URI."""
    if uri.startswith("sqlite:///"):
        return uri.removeprefix("sqlite:///")
    path = urlsplit(uri).path if uri.startswith("file://") else uri.removeprefix("file:")
    return unquote(path)


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
