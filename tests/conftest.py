"""Test helpers shared across packages live in tests/support (plain modules, no heavy imports here:
tests/dags runs in the Airflow environment, which has neither torch nor pandas)."""

import sys
from pathlib import Path

SUPPORT = Path(__file__).parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))
