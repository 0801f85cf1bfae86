"""The code's version stamp (ranking/core/code_version.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_code_version_without_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source checkout without ``pip install -e .``: the stamp comes from pyproject.toml, not a crash."""
    import importlib.metadata
    import tomllib

    from ranking.core.code_version import code_version

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    stamp = code_version()
    assert stamp.split("+g")[0] == project["version"]
