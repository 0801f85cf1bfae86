"""infra/ci/install-servers.sh is idempotent: with the servers installed it changes nothing."""

from __future__ import annotations

import subprocess

import pytest
from monitoring_fixtures import INFRA, binary

SCRIPT = INFRA / "ci/install-servers.sh"


def test_script_is_executable_and_valid_bash() -> None:
    assert SCRIPT.stat().st_mode & 0o111, ".ci/run only calls it when it is executable"
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_second_run_is_a_no_op() -> None:
    if not all(binary(b) for b in ("prometheus", "promtool", "prometheus-pushgateway", "docker-compose")):
        pytest.skip("servers not installed here: the script would install them (CI does)")
    result = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "already present" in result.stdout


def test_it_never_starts_services() -> None:
    text = SCRIPT.read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    # `systemctl disable` only edits symlinks (the units the packages enable); nothing is started
    for verb in ("start", "restart", "reload", "enable --now"):
        assert f"systemctl {verb}" not in code
    assert "service prometheus" not in code and "invoke-rc.d" not in code
    assert "policy-rc.d" in text  # maintainer scripts are told not to start the daemons
