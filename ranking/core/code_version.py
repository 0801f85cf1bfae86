"""The code's version stamp (``<package version>[+g<git sha>]``): what a training run records
(``TrainSummary.code_version``) and what the backtest's day fingerprints chain over, so a replay
reused under other code is replayed."""

from __future__ import annotations

from pathlib import Path


def code_version() -> str:
    """``<package version>[+g<git sha>]``; never raises: a version stamp must not cost a run.

    Without package metadata (a source checkout on PYTHONPATH, no ``pip install -e .``) the version
    is read from the checkout's pyproject.toml, else ``unknown``."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    here = Path(__file__).resolve().parent
    try:
        pkg = version("ranker-retrain")
    except PackageNotFoundError:
        pkg = _source_version(here)
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return pkg
    return f"{pkg}+g{sha}" if sha else pkg


def _source_version(start: Path) -> str:
    import tomllib

    for folder in start.parents:
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                project = tomllib.loads(pyproject.read_text()).get("project", {})
            except (OSError, tomllib.TOMLDecodeError):
                return "unknown"
            if project.get("name") == "ranker-retrain":
                return str(project.get("version", "unknown"))
    return "unknown"
