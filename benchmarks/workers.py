"""Benchmark workers under torchrun: one process group of ``nproc`` fresh processes running a
benchmark module's ``--worker`` mode on a prepared window; rank 0 writes its JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ranking.trainer.distributed.setup import torchrun_command


def run_workers(module: str, nproc: int, manifest: Path, flags: list[str], what: str) -> dict[str, Any]:
    """``module --worker --manifest M --json-out F *flags`` on ``nproc`` processes; rank 0's report."""
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        out = Path(tmp) / "out.json"
        argv = ["--worker", "--manifest", str(manifest), "--json-out", str(out), *flags]
        proc = subprocess.run(
            torchrun_command(nproc, argv, module=module),
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{what} with {nproc} processes failed: {proc.stderr[-3000:]}")
        report: dict[str, Any] = json.loads(out.read_text())
        return report
