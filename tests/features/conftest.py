"""Fixtures for the feature-platform tests: one tiny workspace built through the real path
(synth -> Feast apply -> materialize -> window), shared read-only by the session, and a way to
get a private copy of its source data for tests that break things."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from tinyspace import DAYS, START, WINDOW_DAYS


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from features.testing import make_tiny_workspace

    home = tmp_path_factory.mktemp("tiny") / "home"
    return make_tiny_workspace(home, start=START, days=DAYS, window_days=WINDOW_DAYS, seed=7)


@pytest.fixture
def private_home(tiny: dict[str, Any], tmp_path: Path) -> Path:
    """A fresh workspace holding a copy of the tiny workspace's source data, Feast applied."""
    from features import feast_repo
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    feast_repo.apply(Workspace.resolve(home))
    return home
