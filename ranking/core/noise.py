"""Third-party lines an operator cannot act on, demoted to DEBUG: kept with ``--log-level DEBUG``,
out of the step's own log otherwise (issue 35: 21 Feast registry refreshes in one apply, a DuckDB
deprecation per partition built, a torch FX note in every gate log).

Each entry is narrow: the logger that emits it (or the warning's category) and the start of its
message, so a new warning from the same library still shows.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Protocol, TextIO


@dataclass(frozen=True)
class LogNoise:
    """Records of ``logger`` whose message starts with ``prefix``."""

    logger: str
    prefix: str


@dataclass(frozen=True)
class WarningNoise:
    """Warnings of ``category`` (exactly) whose message starts with ``prefix``."""

    category: type[Warning]
    prefix: str


LOG_NOISE: tuple[LogNoise, ...] = (
    # feast re-reads its registry file on a 0 s cache TTL, at INFO, each time a store call reads it
    LogNoise("feast.infra.registry.registry", "Registry cache expired, so refreshing"),
    # torchrec's KeyedTensor regrouping asks torch whether it is being traced, on every forward
    LogNoise("torch.fx._symbolic_trace", "is_fx_tracing will return true"),
    # MLflow's SQLite store announces its schema set-up and check at INFO, through its own handler,
    # on every process that opens the workspace's local store
    LogNoise("mlflow.store.db.utils", "Creating initial MLflow database tables"),
    LogNoise("mlflow.store.db.utils", "Updating database tables"),
)

WARNING_NOISE: tuple[WarningNoise, ...] = (
    # ibis's DuckDB backend calls the method DuckDB deprecated: ours to wait out, not to fix
    WarningNoise(DeprecationWarning, "fetch_arrow_table() is deprecated"),
)

# the demoted warnings are logged here at DEBUG (logging.captureWarnings's logger)
WARNINGS_LOGGER = "py.warnings"


def debug_wanted() -> bool:
    """Whether the process logs at DEBUG (``--log-level DEBUG``): the root logger's level decides."""
    return logging.getLogger().getEffectiveLevel() <= logging.DEBUG


class DemoteNoise(logging.Filter):
    """A logger filter: a record of ``noise`` becomes a DEBUG record, dropped unless DEBUG is on.

    On the emitting logger, not on the root's handlers: torch's loggers have a handler of their
    own and do not propagate to the root."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(self.prefixes):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return debug_wanted()


def is_noise_warning(category: type[Warning], message: str) -> bool:
    return any(category is n.category and message.startswith(n.prefix) for n in WARNING_NOISE)


def install() -> None:
    """Demote :data:`LOG_NOISE` and :data:`WARNING_NOISE` in this process (idempotent: each
    logger gets one filter, ``warnings.showwarning`` one wrapper)."""
    by_logger: dict[str, tuple[str, ...]] = {}
    for noise in LOG_NOISE:
        by_logger[noise.logger] = (*by_logger.get(noise.logger, ()), noise.prefix)
    for name, prefixes in by_logger.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, DemoteNoise) for f in logger.filters):
            logger.addFilter(DemoteNoise(prefixes))
    if not getattr(warnings.showwarning, "demotes_noise", False):
        warnings.showwarning = _demoting(warnings.showwarning)


class _ShowWarning(Protocol):
    def __call__(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None: ...


def _demoting(previous: _ShowWarning) -> _ShowWarning:
    """``previous`` (how warnings are shown), with :data:`WARNING_NOISE` logged at DEBUG instead."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if is_noise_warning(category, str(message)):
            logging.getLogger(WARNINGS_LOGGER).debug(
                "%s:%s: %s: %s", filename, lineno, category.__name__, message
            )
            return
        previous(message, category, filename, lineno, file, line)

    show.demotes_noise = True  # type: ignore[attr-defined]
    return show
