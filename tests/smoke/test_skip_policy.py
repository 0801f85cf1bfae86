"""The skip policy of tests/conftest.py: under RANKER_STRICT_SKIPS=1 (`make test`) a skip whose reason
is not on ALLOWED_SKIPS fails the session; allowed ones pass; the count is printed and logged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def run_suite(tmp_path: Path, body: str, strict: bool) -> tuple[subprocess.CompletedProcess[str], Path]:
    suite = tmp_path / "tests"
    suite.mkdir()
    shutil.copy(TESTS / "conftest.py", suite / "conftest.py")
    (suite / "test_some.py").write_text("import pytest\n\n" + body)
    log = tmp_path / "skips.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("RANKER_STRICT_SKIPS", "RANKER_SKIP_LOG")}
    env["RANKER_SKIP_LOG"] = str(log)
    if strict:
        env["RANKER_STRICT_SKIPS"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    return proc, log


MIXED = (
    "def test_ok():\n    pass\n\n"
    "def test_gpu():\n    pytest.skip('no GPU: CUDA only')\n\n"
    "def test_server():\n    pytest.skip('redis-server not installed')\n"
)


def test_a_skip_for_another_reason_fails_a_strict_session(tmp_path: Path) -> None:
    proc, log = run_suite(tmp_path, MIXED, strict=True)
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout
    assert "skip policy: 2 skipped, 1 for a reason not in" in proc.stdout
    assert "test_server: redis-server not installed" in proc.stdout
    assert "test_gpu" not in proc.stdout.split("FAILED: skips not allowed")[1]
    assert json.loads(log.read_text()) | {"args": None} == {"args": None, "skipped": 2, "not_allowed": 1}


def test_without_strict_the_same_skips_only_get_counted(tmp_path: Path) -> None:
    proc, _ = run_suite(tmp_path, MIXED, strict=False)
    assert proc.returncode == 0, proc.stdout
    assert "skip policy: 2 skipped, 1 for a reason not in" in proc.stdout


def test_allowed_reasons_pass_a_strict_session(tmp_path: Path) -> None:
    body = (
        "def test_gpu():\n    pytest.skip('no GPU: CUDA only')\n\n"
        "@pytest.mark.skipif(True, reason='no Docker engine: DockerOperator')\n"
        "def test_docker():\n    pass\n"
    )
    proc, _ = run_suite(tmp_path, body, strict=True)
    assert proc.returncode == 0, proc.stdout
    assert "skip policy: 2 skipped, 0 for a reason not in" in proc.stdout


def test_a_failing_test_keeps_its_exit_code(tmp_path: Path) -> None:
    proc, _ = run_suite(tmp_path, "def test_bad():\n    assert False\n", strict=True)
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED
