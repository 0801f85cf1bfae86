"""`make demo` against its description in docs/orchestration.md (issue 26): a fresh run of
infra/demo.sh with the default sizes, its summary (what ran, why the gate decided) compared with
the run quoted in the docs.

Seeded values must match exactly: dates, days, epochs, versions, which model each run started
from and was gated against, the checks, their verdicts and the outcomes. Measured values (every
decimal: metrics, changes, intervals, thresholds) are masked on both sides, and the docs do not quote
them as fixed. The demo runs in its own folder (DEMO_DIR), never over var/demo.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dag_test_paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(2400)]
DOCS = REPO / "docs" / "orchestration.md"
# a measured number: a decimal, a signed percentage, a duration; integers (dates, days, versions,
# epochs) are seeded and stay
MEASURED = re.compile(r"[+-]?\d+\.\d+%?|[+-]\d+%")
# `airflow dags test` names its runs by the wall clock (manual__<now>): not seeded either
RUN_ID = re.compile(r"manual__\d{4}-\d\d-\d\dT[\d:.]+\+00:00")


def masked(text: str) -> list[str]:
    return [
        MEASURED.sub("<x>", RUN_ID.sub("manual__<now>", line.rstrip())) for line in text.strip().splitlines()
    ]


def documented_summary() -> str:
    blocks = re.findall(r"^```text demo-summary\n(.*?)^```$", DOCS.read_text(), re.M | re.S)
    assert len(blocks) == 1, "docs/orchestration.md needs one ```text demo-summary block (the demo's summary)"
    return blocks[0]


def _load_demo_summary() -> object:
    sys.path.insert(0, str(REPO / "infra"))
    try:
        import demo_summary
    finally:
        sys.path.remove(str(REPO / "infra"))
    return demo_summary


def test_a_fresh_demo_runs_the_shipped_recipe_as_the_docs_describe(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RANKER_", "DEMO_"))}
    env.update({"DEMO_DIR": str(tmp_path), "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")})
    proc = subprocess.run(
        ["bash", str(REPO / "infra" / "demo.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=2300,
    )
    assert proc.returncode == 0, f"make demo failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"
    summary = json.loads((tmp_path / "demo-logs" / "demo.json").read_text())
    # the shipped recipe: a base model first, then both days warm-started from it; day 2 is gated
    # against day 1's champion
    base, (day1, day2) = summary["base"], summary["days"]
    assert base and base["version"] == "v0001", base
    for day in (day1, day2):
        assert day["recipe"]["warm_start"] == f"base {base['version']}", day["recipe"]
    assert day1["champion"] is None and day1["outcome"] == "promoted", day1
    assert day2["champion"] == day1["candidate"], (day1, day2)
    rendered = _load_demo_summary().render(summary)  # type: ignore[attr-defined]
    assert rendered in proc.stdout  # the terminal shows it
    actual = masked(rendered.replace(str(tmp_path / "demo"), "var/demo"))
    assert actual == masked(documented_summary()), "\n".join(actual)
