"""Delivering the samples: a PUT on the Pushgateway group ``job=<job>`` (the group always holds the
complete current state, so no series lingers from an older run), retried with exponential backoff;
otherwise, or when every attempt failed, an atomic write of the textfile-collector file."""

from __future__ import annotations

import logging
import os
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import push_to_gateway
from tenacity import RetryCallState, Retrying, stop_after_attempt, wait_exponential

from ranking.core.atomic import atomic_write_text
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.monitoring.exposition import build_registry, render
from ranking.monitoring.samples import Sample

log = logging.getLogger(__name__)

DEFAULT_JOB = "ranker_retrain"
PUSHGATEWAY_ENV = "RANKER_PUSHGATEWAY_URL"
_JOB = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def validate_pushgateway_url(url: str) -> str:
    """A Pushgateway base URL: http(s), a host, no credentials, query or fragment."""
    parsed = urllib.parse.urlsplit(url)
    if (
        parsed.scheme not in ("http", "https")
        or not parsed.hostname
        or parsed.username is not None
        or parsed.query
        or parsed.fragment
        or any(c.isspace() or ord(c) < 32 for c in url)
    ):
        raise RankerError(
            f"invalid Pushgateway URL {url!r}: expected http(s)://host[:port][/path] "
            "(no credentials, query or fragment)"
        )
    try:
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise RankerError(f"invalid Pushgateway URL {url!r}: bad port") from None
    return url.rstrip("/")


def validate_job(job: str) -> str:
    if not _JOB.match(job):
        raise RankerError(f"invalid job name {job!r}: use letters, digits and _")
    return job


def resolve_pushgateway(cli_value: str | None) -> str | None:
    """--pushgateway wins; else $RANKER_PUSHGATEWAY_URL; an empty value means "not configured"."""
    url = cli_value if cli_value is not None else os.environ.get(PUSHGATEWAY_ENV)
    if not url:
        return None
    return validate_pushgateway_url(url)


@dataclass(frozen=True)
class PushConfig:
    url: str
    job: str = DEFAULT_JOB
    attempts: int = 3
    backoff_seconds: float = 1.0  # doubled after each failed attempt
    timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        validate_pushgateway_url(self.url)
        validate_job(self.job)
        if self.attempts < 1:
            raise RankerError(f"push attempts must be >= 1, got {self.attempts}")
        if self.backoff_seconds < 0 or self.timeout_seconds <= 0:
            raise RankerError("push backoff must be >= 0 and timeout > 0")


@dataclass(frozen=True)
class PushResult:
    ok: bool
    attempts: int
    error: str | None = None


def _describe(exc: BaseException | None) -> str:
    return f"{type(exc).__name__}: {exc}"


def push_with_retries(
    samples: list[Sample], config: PushConfig, sleep: Callable[[float], None] = time.sleep
) -> PushResult:
    """PUT the samples on the Pushgateway group ``job=<job>``; retry with exponential backoff."""
    registry = build_registry(samples)
    url = validate_pushgateway_url(config.url)
    attempts = 0

    def push_once() -> None:
        nonlocal attempts
        attempts += 1
        push_to_gateway(url, job=config.job, registry=registry, timeout=config.timeout_seconds)

    def log_failure(state: RetryCallState) -> None:
        error = _describe(state.outcome.exception() if state.outcome else None)
        log.warning("push to %s failed (attempt %d/%d): %s", config.url, attempts, config.attempts, error)

    retrying = Retrying(
        stop=stop_after_attempt(config.attempts),
        wait=wait_exponential(multiplier=config.backoff_seconds),
        sleep=lambda seconds: sleep(float(seconds)),
        after=log_failure,
        reraise=True,
    )
    try:
        retrying(push_once)
    except Exception as exc:  # any transport/HTTP failure: a push must never fail the retrain
        return PushResult(ok=False, attempts=attempts, error=_describe(exc))
    return PushResult(ok=True, attempts=attempts)


def textfile_path(ws: Workspace) -> Path:
    """The textfile-collector output of a workspace (used when no Pushgateway is configured)."""
    return ws.metrics / "ranker.prom"


def write_textfile(path: Path, exposition: str) -> None:
    try:
        atomic_write_text(path, exposition)
    except OSError as exc:
        raise RankerError(f"cannot write the metrics textfile {path}: {exc}") from None


@dataclass(frozen=True)
class Delivered:
    """Where a command's samples went."""

    delivery: str  # pushgateway | textfile
    target: str
    samples: int


def deliver_samples(samples: list[Sample], pushgateway: str | None, textfile: Path, job: str) -> Delivered:
    """Push ``samples`` under ``job`` when a Pushgateway is configured; the ``textfile`` when the
    push fails or there is none (``ranker gc``'s and ``ranker review``'s series, each its own job)."""
    if pushgateway:
        config = PushConfig(url=pushgateway, job=job)
        if push_with_retries(samples, config).ok:
            return Delivered("pushgateway", f"{config.url} job={job}", len(samples))
    write_textfile(textfile, render(samples))
    return Delivered("textfile", str(textfile), len(samples))
