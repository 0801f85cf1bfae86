"""The project environment is consistent (issue 25: `pip check` failed on a fresh clone,
python-dateutil 4.0.0 against botocore/aiobotocore's <3). The one conflict accepted is torchrec's
declared CUDA fbgemm-gpu: the CPU env holds fbgemm-gpu-cpu, the same modules (requirements/trainer.in)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ACCEPTED = re.compile(r"torchrec \S+ requires fbgemm-gpu, which is not installed\.")


def test_pip_check_finds_nothing_but_torchrecs_fbgemm_gpu() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    problems = [
        line for line in lines if not ACCEPTED.fullmatch(line) and line != "No broken requirements found."
    ]
    assert problems == [], proc.stdout + proc.stderr


def test_the_lock_pins_what_the_top_level_pins_allow() -> None:
    """trainer.in's python-dateutil<3 is honoured by trainer.lock (a lock edited or regenerated
    without it would bring the conflict back)."""
    lock = (REPO / "requirements" / "trainer.lock").read_text()
    pinned = re.search(r"^python-dateutil==(\d+)\.", lock, re.MULTILINE)
    assert pinned is not None and int(pinned.group(1)) < 3
    assert re.search(r"^python-dateutil<3$", (REPO / "requirements" / "trainer.in").read_text(), re.MULTILINE)
