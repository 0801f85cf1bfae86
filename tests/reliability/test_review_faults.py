"""Review faults of issue 32: a switch that the history cannot record is no switch, a torn history
line stays torn alone, a forged reviewed recipe is refused, bad review flags are one line, and a
review that could not weigh its recipes is a failed command (exit 2), not a green task."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.config.loader import ConfigFileError, load
from ranking.review.rule import ReviewError
from ranking.review.switch import HISTORY_FILE, SwitchDecision, apply_switch, read_state

NOW = dt.datetime(2026, 12, 6, 8, 0, tzinfo=dt.UTC)
SWITCH = SwitchDecision(True, "naive", "review 2026-12-06 recommends naive")
VALUES = {"recipe.schedule": "joint", "recipe.epochs": 1}


def _auto(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "ranker.toml").write_text('[review]\nrecipe = "auto"\n')
    (home / "reviews").mkdir(exist_ok=True)
    return home


def test_a_history_that_cannot_be_written_leaves_no_switch(tmp_path: Path) -> None:
    home = _auto(tmp_path / "home")
    (home / HISTORY_FILE).mkdir()  # a folder where the history should be: EISDIR
    with pytest.raises(IsADirectoryError):
        apply_switch(home, SWITCH, "2026-12-06", VALUES, NOW)
    assert read_state(home) is None  # the daily run still trains [recipe] as configured
    assert load(home).sources["recipe.epochs"] == "default"


def test_a_switch_after_a_torn_history_line_is_a_line_of_its_own(tmp_path: Path) -> None:
    home = _auto(tmp_path / "home")
    (home / HISTORY_FILE).write_text('{"recipe": "default", "review_id": "2026-11-2')  # killed mid-line
    apply_switch(home, SWITCH, "2026-12-06", VALUES, NOW)
    lines = (home / HISTORY_FILE).read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["recipe"] == "naive"
    assert read_state(home) is not None and read_state(home).recipe == "naive"  # type: ignore[union-attr]
    assert load(home).sources["recipe.epochs"] == "review:2026-12-06:naive"


@pytest.mark.parametrize(
    ("recipe", "review_id", "match"),
    [
        ("naive\n[gate]\ntolerance = 0.99", "2026-12-06", "not a recipe name"),
        ("naive", "2026-12-06\nx", "not a review id"),
        ("naive", "last week", "not a review id"),
    ],
)
def test_a_forged_reviewed_recipe_is_refused_in_one_line(
    tmp_path: Path, recipe: str, review_id: str, match: str
) -> None:
    home = _auto(tmp_path / "home")
    state = {"recipe": recipe, "review_id": review_id, "values": VALUES}
    (home / "reviews" / "recipe.json").write_text(json.dumps(state))
    with pytest.raises(ConfigFileError, match=match) as found:
        load(home)
    assert "\n" not in str(found.value).split(": ", 1)[0]
    with pytest.raises(ReviewError, match=match):
        read_state(home)


def test_bad_review_flags_are_one_line_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.cli.main import main

    tmp_path.joinpath("ranker.toml").write_text("")
    try:  # refused by the flag's parser or by [review] under the flags: exit 2 either way
        code = main(["review", "--home", str(tmp_path), "--days", "366", "--end", "2026-12-06"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--days" in err[0] and "366" in err[0] and "365" in err[0], err
    assert err[0].count("ranker review: ") == 1 and "validation error" not in err[0]


@pytest.mark.slow
def test_a_review_whose_days_all_failed_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from features.testing import make_tiny_workspace
    from ranking.cli.main import main

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=6, window_days=4, build=False)
    (home / "ranker.toml").write_text(
        '[window]\ndays = 4\n[review]\ndays = 1\nmin_days = 1\nrecipes = ["naive"]\nbaseline = "naive"\n'
    )
    # an eval day past the data: its window cannot be built, so no recipe has evidence
    assert main(["review", "--home", str(home), "--end", "2026-02-01"]) == 2
    err = [
        line
        for line in capsys.readouterr().err.strip().splitlines()
        if '"event": "review_progress"' not in line
    ]
    assert len(err) == 1 and "review 2026-02-01 failed (the daily recipe stays)" in err[0], err
    latest = json.loads((home / "reviews" / "latest.json").read_text())
    assert latest["status"] == "failed" and latest["recommended"] is None


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state and "\nState:\tX" not in state


@pytest.mark.parametrize("named", [True, False])
def test_a_replayed_days_run_dies_with_the_replay(named: bool) -> None:
    """kill -9 of a review left its day's `ranker run` training on (issue 32): a child started with
    RANKER_PARENT_PID dies with its parent; without it (the control) it lives on."""
    import os
    import signal
    import subprocess
    import sys
    import time

    child_code = (
        "from ranking.core.lifetime import die_with_parent; die_with_parent(); import time;"
        " print('ready', flush=True); time.sleep(60)"
    )
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"env = dict(os.environ, **({{'RANKER_PARENT_PID': str(os.getpid())}} if {named} else {{}}))\n"
        f"child = subprocess.Popen([sys.executable, '-c', {child_code!r}], env=env, stdout=subprocess.PIPE, text=True)\n"
        "child.stdout.readline()\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        # named: wait until the child is gone (10 s at most); the control: it must outlive 2 s
        # of waiting, a sleep that is the check itself (no event marks "still alive")
        deadline = time.monotonic() + (10 if named else 2)
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(child) is not named
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
