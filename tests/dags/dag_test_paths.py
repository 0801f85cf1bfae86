"""Paths the DAG tests share (a plain module: `from conftest import ...` is ambiguous when several
test folders have a conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
RANKER_BIN = Path(os.environ.get("RANKER_BIN") or REPO / ".venv" / "bin" / "ranker")
