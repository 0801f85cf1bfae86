"""Test helpers shared across packages live in tests/support (plain modules, no heavy imports here:
tests/dags and tests/stack run in the Airflow environment, which has neither torch nor pandas).

The skip policy (README.md, "`make test`"): a test may skip only for a reason on ALLOWED_SKIPS. `make test`
sets RANKER_STRICT_SKIPS=1, and then any other skip fails the session; every session prints its
skip count, and appends it to $RANKER_SKIP_LOG (one JSON line) when that is set (CI prints them).
"""

import json
import os
import sys
from pathlib import Path

import pytest

SUPPORT = Path(__file__).parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

# what cannot be installed or granted by `make test` (infra/ci/install-servers.sh installs the rest)
ALLOWED_SKIPS = ("no GPU", "no Docker engine", "needs root")


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ")


def _skips(session: pytest.Session) -> tuple[list[str], list[tuple[str, str]]]:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter else []
    reasons = [(r.nodeid, skip_reason(r)) for r in reports]
    return [reason for _, reason in reasons], [(n, r) for n, r in reasons if not r.startswith(ALLOWED_SKIPS)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reasons, bad = _skips(session)
    strict = os.environ.get("RANKER_STRICT_SKIPS") == "1"
    session.config.stash[_BAD_SKIPS] = bad
    if strict and bad and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    log = os.environ.get("RANKER_SKIP_LOG")
    if log:
        line = {
            "args": session.config.invocation_params.args,
            "skipped": len(reasons),
            "not_allowed": len(bad),
        }
        with open(log, "a") as f:
            f.write(json.dumps(line) + "\n")


_BAD_SKIPS = pytest.StashKey[list[tuple[str, str]]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    bad = config.stash.get(_BAD_SKIPS, [])
    skipped = len(terminalreporter.stats.get("skipped", []))
    terminalreporter.write_line(
        f"skip policy: {skipped} skipped, {len(bad)} for a reason not in {list(ALLOWED_SKIPS)}"
    )
    if bad and os.environ.get("RANKER_STRICT_SKIPS") == "1":
        terminalreporter.write_line(
            "FAILED: skips not allowed under `make test` (RANKER_STRICT_SKIPS=1):", red=True
        )
        for nodeid, reason in bad:
            terminalreporter.write_line(f"  {nodeid}: {reason}", red=True)
