"""Fixtures of the monitoring tests (helpers that are plain functions live in monitoring_fixtures)."""

from pathlib import Path

import pytest

from ranking.core.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "home")
