"""The study runner: the `ranker train` command line each cell runs, its result, and reuse by
fingerprint. A stand-in `ranker` (a short script) records its arguments and prints a train
summary, so these tests run no training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from study_fixtures import END

from ranking.core.workspace import Workspace
from ranking.study.runner import StudyRunner
from ranking.study.spec import Cell, StudyError, StudySpec

# prints a `ranker train --json` summary with one epoch per schedule letter; appends argv to calls.jsonl
FAKE_RANKER = r"""
import json, sys
from pathlib import Path
args = sys.argv[1:]
opt = lambda name: args[args.index(name) + 1]
with open(Path(opt("--home")) / "calls.jsonl", "a") as f:
    f.write(json.dumps(args) + "\n")
if opt("--seed") == "13":
    print("training loss is NaN", file=sys.stderr)
    sys.exit(2)
phases = opt("--schedule").split(",")
epochs = [{"eval": {"save_hit_at_3": 0.2 + 0.01 * i, "auc": 0.7, "ne": 0.9}, "loss": 0.5 - 0.1 * i}
          for i, _ in enumerate(phases)]
print(json.dumps({"schedule": opt("--schedule"), "epochs": epochs}))
"""


@pytest.fixture
def runner(tmp_path: Path) -> StudyRunner:
    ws = Workspace(tmp_path / "home")
    ws.root.mkdir(parents=True)
    spec = StudySpec(end=END, epochs=(1, 2, 3), inits=("scratch", "warm_dense"), seeds=1)
    return StudyRunner(ws, spec, ws.studies / "s", parallel=1, ranker=[sys.executable, "-c", FAKE_RANKER])


def calls(runner: StudyRunner) -> list[list[str]]:
    path = runner.ws.root / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_cell_trains_its_schedule_for_the_longest_epoch_count_and_records_every_epoch(
    runner: StudyRunner,
) -> None:
    cell = Cell(20, "delayed", 0, "warm_dense")
    warm = runner.ws.root / "base" / "model.pt"
    result = runner.run_cell(cell, END, "window-a", warm)
    (argv,) = calls(runner)
    opt = {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1) if argv[i].startswith("--")}
    assert argv[0] == "train"
    assert opt["--schedule"] == "F,J,J"  # delayed at max(epochs) = 3, from the trainer's table
    assert (opt["--end"], opt["--days"], opt["--seed"]) == (END.isoformat(), "20", "0")
    assert opt["--warm-start"] == str(warm) and opt["--warm-start-scope"] == "dense"
    assert {"--no-register", "--no-progress", "--json"} <= set(argv)
    assert [e.save_hit_at_3 for e in result.eval_by_epoch] == pytest.approx([0.2, 0.21, 0.22])
    assert result.reused is False and result.warm_from == str(warm)
    on_disk = json.loads((runner.cell_dir(cell) / "result.json").read_text())
    assert on_disk["fingerprint"] == result.fingerprint and "reused" not in on_disk


def test_a_base_run_trains_one_joint_epoch_from_scratch(runner: StudyRunner) -> None:
    runner.run_cell(Cell(10, "joint", 0, "base"), END, "window-b", None)
    (argv,) = calls(runner)
    assert argv[argv.index("--schedule") + 1] == "J"
    assert argv[argv.index("--warm-start") + 1] == "none" and "--warm-start-scope" not in argv


def test_a_finished_cell_is_reused_until_its_inputs_change(runner: StudyRunner) -> None:
    cell = Cell(20, "frozen", 0, "scratch")
    first = runner.run_cell(cell, END, "window-a", None)
    again = runner.run_cell(cell, END, "window-a", None)
    assert again.reused is True and again.fingerprint == first.fingerprint
    assert len(calls(runner)) == 1
    changed = runner.run_cell(cell, END, "window-b", None)  # the window was rebuilt
    assert changed.reused is False and changed.fingerprint != first.fingerprint
    assert len(calls(runner)) == 2


def test_a_failed_run_names_its_cell_and_the_end_of_its_stderr(runner: StudyRunner) -> None:
    with pytest.raises(StudyError, match=r"scratch-w20-joint-s13 failed \(exit 2\): training loss is NaN"):
        runner.run_cell(Cell(20, "joint", 13, "scratch"), END, "window-a", None)
    assert not (runner.cell_dir(Cell(20, "joint", 13, "scratch")) / "result.json").exists()
