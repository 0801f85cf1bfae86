"""The Prometheus config and alert rules pass promtool's checks and unit tests."""

from __future__ import annotations

import subprocess

import pytest
from monitoring_fixtures import INFRA, binary

PROMTOOL = binary("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package prometheus; infra/ci/install-servers.sh)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=INFRA / "prometheus", capture_output=True, text=True, timeout=60
    )


def test_config_is_valid() -> None:
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout + result.stderr


def test_rules_are_valid() -> None:
    result = promtool("check", "rules", "rules/ranker.rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_unit_tests_pass() -> None:
    result = promtool("test", "rules", "tests/ranker.rules.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test() -> None:
    import yaml

    rules = yaml.safe_load((INFRA / "prometheus/rules/ranker.rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((INFRA / "prometheus/tests/ranker.rules.test.yml").read_text())
    tested = {a["alertname"] for t in tests["tests"] for a in t.get("alert_rule_test", [])}
    fired = {
        a["alertname"] for t in tests["tests"] for a in t.get("alert_rule_test", []) if a.get("exp_alerts")
    }
    assert alerts == tested == fired, "every alert needs a test in which it fires"


def test_a_broken_rule_file_is_caught(tmp_path) -> None:
    bad = tmp_path / "bad.rules.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: ranker_x >\n")
    result = promtool("check", "rules", str(bad))
    assert result.returncode != 0
