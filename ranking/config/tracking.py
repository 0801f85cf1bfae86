"""The ``[tracking]`` section's value checks (:class:`ranking.config.model.TrackingSection`): an
MLflow tracking URI we can use, and a registered model's name. Here, below the config, so that
``ranking.tracking`` (above it) reads the same rules.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

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
