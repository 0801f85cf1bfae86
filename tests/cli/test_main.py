"""The ``ranker`` entry point: building the parser imports no heavy library."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_stays_light() -> None:
    code = "import sys, ranking.cli.main; ranking.cli.main.build_parser(); print(sorted(m for m in ('torch','torchrec','pandas','pyarrow') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "torch" not in out
