"""The `ranker` log on stderr carries the step's own lines, not fbgemm_gpu's library-load chatter
(an Airflow task streams that stderr into its log: issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import logging
from ranking.cli.main import configure_logging
configure_logging("INFO")
import fbgemm_gpu  # logs 'Successfully loaded: <lib>.so' at INFO on the root logger per library
logging.getLogger("ranking.step").info("the step's own line")
logging.getLogger().warning("a warning of the root logger")
"""


def test_fbgemm_load_chatter_is_kept_out_of_the_log() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Successfully loaded" not in proc.stderr, proc.stderr[:2000]
    assert "INFO ranking.step the step's own line" in proc.stderr
    assert "WARNING root a warning of the root logger" in proc.stderr
