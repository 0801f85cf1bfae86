"""Third-party lines an operator cannot act on stay out of `ranker`'s log, and show with
`--log-level DEBUG` (issue 35: 21 Feast "Registry cache expired" lines in one apply, a DuckDB
`fetch_arrow_table()` DeprecationWarning per partition, torch's `is_fx_tracing` note in the gate log)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ranking.core.noise import LOG_NOISE, DemoteNoise, is_noise_warning

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

# each noise line, emitted the way its library does, and an unrelated line of the same library
SCRIPT = """
import logging, sys, warnings
warnings.simplefilter("default")  # shown, unless the noise filter takes them
from ranking.cli.main import configure_logging
configure_logging(sys.argv[1])
configure_logging(sys.argv[1])  # twice, as in-process callers do: one filter, one wrapper
assert len(logging.getLogger("feast.infra.registry.registry").filters) == 1
import torch.fx._symbolic_trace as fx
fx.is_fx_tracing()  # logs its note at WARNING through torch's own handler (no propagation)
fx.log.warning("another torch.fx warning")
feast = logging.getLogger("feast.infra.registry.registry")
feast.info("Registry cache expired, so refreshing")
feast.info("Registry file not found. Creating new registry.")
warnings.warn_explicit(
    "fetch_arrow_table() is deprecated, use to_arrow_table() instead.",
    DeprecationWarning, "ibis/backends/duckdb/__init__.py", 332, module="ibis.backends.duckdb",
)
warnings.warn_explicit(
    "fetch_record_batch() is deprecated, use to_arrow_reader() instead.",
    DeprecationWarning, "ibis/backends/duckdb/__init__.py", 340, module="ibis.backends.duckdb",
)
warnings.warn("fetch_arrow_table() is deprecated: but a UserWarning", UserWarning)
import mlflow  # installs MLflow's own stderr handler on its loggers
store = logging.getLogger("mlflow.store.db.utils")
store.info("Creating initial MLflow database tables...")
store.info("Updating database tables")
store.warning("Another MLflow store line")
"""

NOISE = (
    "is_fx_tracing will return true",
    "Registry cache expired",
    "fetch_arrow_table() is deprecated, use",
    "Creating initial MLflow database tables",
    "Updating database tables",
)
KEPT = (
    "another torch.fx warning",
    "Registry file not found",
    "fetch_record_batch() is deprecated",
    "UserWarning: fetch_arrow_table() is deprecated: but a UserWarning",
    "Another MLflow store line",
)


def run_script(level: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, level], capture_output=True, text=True, env=ENV, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stderr


def test_noise_is_left_out_of_the_info_log_and_nothing_else() -> None:
    stderr = run_script("INFO")
    for line in NOISE:
        assert line not in stderr, stderr
    for line in KEPT:
        assert line in stderr, stderr


def test_noise_shows_at_debug() -> None:
    stderr = run_script("DEBUG")
    assert "DEBUG feast.infra.registry.registry Registry cache expired, so refreshing" in stderr, stderr
    assert (
        "DEBUG py.warnings " in stderr and "DeprecationWarning: fetch_arrow_table() is deprecated" in stderr
    )
    assert "is_fx_tracing will return true" in stderr, stderr
    assert "Creating initial MLflow database tables" in stderr, stderr
    for line in KEPT:
        assert line in stderr, stderr


def record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_the_filter_demotes_only_its_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    feast = next(n for n in LOG_NOISE if n.logger.startswith("feast"))
    demote = DemoteNoise((feast.prefix,))
    noisy = record(feast.logger, logging.INFO, "Registry cache expired, so refreshing")
    other = record(feast.logger, logging.INFO, "Registry file not found. Creating new registry.")

    monkeypatch.setattr(logging.getLogger(), "level", logging.INFO)
    assert demote.filter(noisy) is False
    assert (noisy.levelno, noisy.levelname) == (logging.DEBUG, "DEBUG")
    assert demote.filter(other) is True
    assert (other.levelno, other.levelname) == (logging.INFO, "INFO")

    monkeypatch.setattr(logging.getLogger(), "level", logging.DEBUG)
    assert demote.filter(record(feast.logger, logging.INFO, "Registry cache expired, so refreshing"))


def test_warning_noise_is_matched_by_category_and_message() -> None:
    message = "fetch_arrow_table() is deprecated, use to_arrow_table() instead."
    assert is_noise_warning(DeprecationWarning, message)
    assert not is_noise_warning(UserWarning, message)
    assert not is_noise_warning(FutureWarning, message)
    assert not is_noise_warning(
        DeprecationWarning, "fetch_record_batch() is deprecated, use to_arrow_reader()"
    )


def apply(home: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ranking.cli", *flags, "features", "apply", "--home", str(home)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )


def test_features_apply_prints_no_registry_refresh(tmp_path: Path) -> None:
    """The real `ranker features apply` on a tiny workspace: Feast refreshes its registry many
    times (seen at DEBUG), and the operator's log says nothing of it."""
    from features.testing import make_tiny_workspace

    make_tiny_workspace(tmp_path / "source-only", days=2, build=False)
    for name in ("info", "debug"):
        shutil.copytree(tmp_path / "source-only" / "source", tmp_path / name / "source")

    quiet = apply(tmp_path / "info")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "Created feature service" in quiet.stdout + quiet.stderr  # Feast's own report stays
    assert "Registry cache expired" not in quiet.stderr, quiet.stderr[-2000:]

    debug = apply(tmp_path / "debug", "--log-level", "DEBUG")
    assert debug.returncode == 0, debug.stderr[-2000:]
    assert debug.stderr.count("DEBUG feast.infra.registry.registry Registry cache expired") > 1
