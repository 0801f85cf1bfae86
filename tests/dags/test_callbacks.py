"""The failure callback publishes the failed step for monitoring and never raises."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

from ranker_dags.callbacks import make_failure_callback
from ranker_dags.settings import OrchestrationSettings


def recording_ranker(folder: Path) -> tuple[Path, Path]:
    """A stand-in `ranker` that appends its argv to a file and prints a JSON summary."""
    record = folder / "calls.jsonl"
    script = folder / "ranker"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(record)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "print(json.dumps({'status': 'failed'}))\n"
    )
    script.chmod(0o755)
    return script, record


def context(task_id: str) -> dict[str, object]:
    return {
        "ti": SimpleNamespace(task_id=task_id),
        "dag_run": SimpleNamespace(run_id="scheduled__2026-01-25T03:00:00+00:00"),
    }


def test_callback_publishes_the_failed_step(tmp_path: Path) -> None:
    script, record = recording_ranker(tmp_path)
    callback = make_failure_callback(OrchestrationSettings(ranker_bin=str(script), home=str(tmp_path)))
    callback(context("build_window"))
    callback(context("plan"))  # not a pipeline step: counted as "other"
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls == [
        [
            "metrics",
            "publish",
            "--status",
            "failed",
            "--failed-step",
            step,
            "--json",
            "--home",
            str(tmp_path),
            "--run-id",
            "scheduled__2026-01-25T03:00:00+00:00",
        ]
        for step in ("window", "other")
    ]


def test_callback_never_raises(tmp_path: Path) -> None:
    callback = make_failure_callback(
        OrchestrationSettings(ranker_bin=str(tmp_path / "missing"), home=str(tmp_path))
    )
    callback(context("train"))  # the ranker binary is missing: logged, not raised
    callback({})  # no task instance, no run: still no exception
