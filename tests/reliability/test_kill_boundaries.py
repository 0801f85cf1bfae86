"""kill -9 at every step boundary of `ranker run` and `ranker review`, then a re-run: the same end
state as a run that was never killed (issue 32, deliver 2).

The boundaries are the kill points the command passed in an uninterrupted run
(``ranking.core.killpoints``: ``<step>:start|returned|recorded`` and the review's named writes),
read from its points log, so a step added or moved later is killed at too. Each kill is a real
SIGKILL of the command's own process (no ``finally``, no atexit, locks released by the kernel);
the re-run is the same command, in this process.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import multiprocessing.context
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ranking.cli.main import main
from ranking.core import killpoints

pytestmark = pytest.mark.slow

START, DAYS = dt.date(2026, 1, 1), 7
RUNS = (("A", "2026-01-06"), ("B", "2026-01-07"))  # A promotes (no champion yet); B is rejected


def _run_argv(home: Path, run_id: str, end: str) -> list[str]:
    return ["run", "--end", end, "--days", "4", "--epochs", "1", "--home", str(home), "--run-id", run_id,
            "--json"]  # fmt: skip


def _main(argv: list[str]) -> int:
    killpoints.reset()
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def points_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    log = tmp_path / "points.log"
    monkeypatch.setenv(killpoints.POINTS_LOG_ENV, str(log))
    yield log
    monkeypatch.delenv(killpoints.POINTS_LOG_ENV)


def _points(argv: list[str], log: Path) -> tuple[int, list[str]]:
    log.unlink(missing_ok=True)
    code = _main(argv)
    return code, log.read_text().split() if log.is_file() else []


def _child(point: str, argv: list[str]) -> None:
    os.environ.pop(killpoints.POINTS_LOG_ENV, None)
    os.environ[killpoints.KILL_AT_ENV] = point
    sys.exit(100 + _main(argv))  # not killed: the point was never reached


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.ForkServerContext:
    """Processes forked from a server that started no thread (a fork of pytest's own process
    deadlocked on a lock another thread held) and imported what a run imports (see ``_warm``)."""
    return multiprocessing.get_context("forkserver")


def _warm(ctx: multiprocessing.context.ForkServerContext) -> None:
    """Before the server starts: preload every module this process has imported by now (after a
    run), so a killed child pays for its run, not for its imports (6 s instead of 1 s a child)."""
    loaded = [
        m
        for m in sys.modules
        if m.startswith(("ranking.", "features.")) or ("." not in m and not m.startswith("_"))
    ]
    ctx.set_forkserver_preload(sorted(set(loaded) - {"__main__"}))


def _killed_at(ctx: multiprocessing.context.ForkServerContext, point: str, argv: list[str]) -> int:
    """Run ``ranker <argv>`` in a process of its own that SIGKILLs itself at ``point``: its exit
    status."""
    child = ctx.Process(target=_child, args=(point, argv))
    child.start()
    child.join(timeout=300)
    return child.exitcode if child.exitcode is not None else 0


def _restore(snapshot: Path, home: Path) -> Path:
    """``home`` as it was when ``snapshot`` was taken of it (always the same path: the Feast store's
    settings name it)."""
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(snapshot, home, symlinks=True)
    return home


def _registry_state(home: Path) -> dict[str, Any]:
    from ranking.registry import Registry

    reg = Registry(str(home / "registry"))
    if not (home / "registry").is_dir():
        return {}
    versions = reg.version_ids()
    return {
        "versions": {
            # the run that made it (a model's bytes name its workspace's paths: not compared)
            v: reg.record(v).run_id if reg.is_complete(v) else "incomplete"
            for v in versions
        },
        "champion": reg.champion(),
        "events": [(e.action, e.from_version, e.to_version, e.run_id, e.forced) for e in reg.history()],
        "verdicts": {
            v: (verdict.decision, sorted(verdict.failed_checks))
            for v in versions
            if (verdict := reg.verdict(v)) is not None
        },
    }


def _run_state(home: Path, run_ids: list[str]) -> dict[str, Any]:
    state: dict[str, Any] = {"registry": _registry_state(home)}
    for run_id in run_ids:
        run = json.loads((home / "pipeline" / run_id / "run.json").read_text())
        state[run_id] = {k: run.get(k) for k in ("exit_code", "version", "decision", "promoted", "forced",
                                                  "kept_champion", "failed_checks", "error")}  # fmt: skip
    return state


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path_factory.mktemp("kill") / "home"
    make_tiny_workspace(home, start=START, days=DAYS, build=False)
    feast_repo.apply(Workspace.resolve(home))
    return home


def test_a_run_killed_at_any_boundary_reruns_to_the_uninterrupted_end_state(
    workspace: Path, tmp_path: Path, points_log: Path, forkserver: multiprocessing.context.ForkServerContext
) -> None:
    from features import feast_repo
    from ranking.core.workspace import Workspace

    # the uninterrupted story, one run after the other, with a snapshot of the workspace before each
    home = _restore(workspace, tmp_path / "home")
    feast_repo.apply(Workspace.resolve(home))
    before: dict[str, Path] = {}
    expected: dict[str, dict[str, Any]] = {}
    points: dict[str, list[str]] = {}
    for run_id, end in RUNS:
        before[run_id] = tmp_path / f"before-{run_id}"
        shutil.copytree(home, before[run_id], symlinks=True)
        code, points[run_id] = _points(_run_argv(home, run_id, end), points_log)
        assert code == (0 if run_id == "A" else 1), run_id
        expected[run_id] = _run_state(home, [run_id])
    assert expected["A"]["A"]["promoted"] and expected["B"]["B"]["decision"] == "reject"
    for step in ("window", "validate", "train", "gate", "promote", "metrics", "run"):
        assert any(p.startswith(f"{step}:returned") for p in points["A"]), (step, points["A"])
    assert any(p.startswith("reject:recorded") for p in points["B"])

    _warm(forkserver)
    wrong: list[str] = []
    killed: set[str] = set()
    for run_id, end in RUNS:
        # B's boundaries that A passed too are killed at in A only
        for point in [p for p in points[run_id] if p not in killed]:
            killed.add(point)
            _restore(before[run_id], home)
            argv = _run_argv(home, run_id, end)
            status = _killed_at(forkserver, point, argv)
            if status != -signal.SIGKILL:
                wrong.append(f"{run_id} {point}: not killed there (status {status})")
                continue
            finished = (home / "pipeline" / run_id / "run.json").is_file()
            code = _main(argv)
            found = _run_state(home, [run_id])
            # killed after its run summary was written, the run had finished: a re-run is refused
            want = (
                2 if finished and point.startswith("run:recorded") else expected[run_id][run_id]["exit_code"]
            )
            if code != want or found != expected[run_id]:
                wrong.append(f"{run_id} killed at {point}: re-run exit {code}, {found} != {expected[run_id]}")
    assert not wrong, "\n".join(wrong)


REVIEW_END = "2026-01-07"
# two cheap recipes, one day, their candidates: the daily recipe (3 epochs) is neither, so with
# recipe = "auto" the review switches to the one it recommends
REVIEW_CONFIG = """[window]
days = 4
[recipe]
epochs = 3
[review]
recipe = "auto"
days = 1
min_days = 1
candidate_only = true
recipes = ["naive", "twice"]
baseline = "naive"
recipes_dir = "{recipes}"
"""
RECIPES = {
    "naive": '[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\n',
    "twice": '[recipe]\nschedule = "joint"\nepochs = 2\nwarm_start = "none"\n',
}


def _review_state(home: Path) -> dict[str, Any]:
    """What a review leaves: the daily recipe it switched to, the switch history, its report."""

    def without_time(record: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record.items() if k != "switched_at"}

    reviews = home / "reviews"
    latest = json.loads((reviews / "latest.json").read_text())
    history = (reviews / "history.jsonl").read_text().splitlines()
    return {
        "recipe": without_time(json.loads((reviews / "recipe.json").read_text())),
        "history": [without_time(json.loads(line)) for line in history],
        "latest": {k: latest.get(k) for k in ("review_id", "status", "recommended", "days_compared")},
        "reports": sorted(p.name for p in (reviews / REVIEW_END).iterdir()),
    }


def test_a_review_killed_at_any_boundary_reruns_to_the_uninterrupted_end_state(
    workspace: Path, tmp_path: Path, points_log: Path, forkserver: multiprocessing.context.ForkServerContext
) -> None:
    from features import feast_repo
    from ranking.core.workspace import Workspace

    home = _restore(workspace, tmp_path / "home")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for name, text in RECIPES.items():
        (recipes / f"{name}.toml").write_text(text)
    (home / "ranker.toml").write_text(REVIEW_CONFIG.format(recipes=recipes))
    feast_repo.apply(Workspace.resolve(home))
    clean = tmp_path / "clean"
    shutil.copytree(home, clean, symlinks=True)
    argv = ["review", "--home", str(home), "--end", REVIEW_END]
    code, points = _points(argv, points_log)
    assert code == 0
    expected = _review_state(home)
    assert expected["recipe"]["recipe"] in RECIPES and len(expected["history"]) == 1, expected
    # the same workspace with the day's replay done (a killed review re-runs it, reused): kills
    # after the replay start from here, so that each costs the review's own steps, not a replay
    replayed = tmp_path / "replayed"
    shutil.copytree(home, replayed, symlinks=True)
    shutil.rmtree(replayed / "reviews")
    assert any(p.startswith("replay:day-recorded") for p in points)
    assert {"review:switch-appended#1", "review:switch-written#1", "review:exported#1"} <= set(points)

    _warm(forkserver)
    wrong: list[str] = []
    for point in points:
        _restore(clean if point.startswith("replay:") else replayed, home)
        status = _killed_at(forkserver, point, argv)
        if status != -signal.SIGKILL:
            wrong.append(f"{point}: not killed there (status {status})")
            continue
        code = _main(argv)
        found = _review_state(home)
        if code != 0 or found != expected:
            wrong.append(f"review killed at {point}: re-run exit {code}, {found} != {expected}")
    assert not wrong, "\n".join(wrong)
