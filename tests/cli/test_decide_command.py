"""`ranker decide` through `ranker`'s entry point: one JSON line per branch, exit codes, step file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scoresets import make_eval_day, with_scores

from ranking.cli.main import main
from ranking.core.workspace import Workspace
from ranking.registry import Registry, register_run
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]


def ranker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(list(argv))
    out = capsys.readouterr().out.strip()
    return code, (json.loads(out.splitlines()[-1]) if out else {})


def test_decide_after_a_real_gate(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = Workspace(tmp_path / "home")
    home = str(ws.root)
    good = register_run(ws, make_run(), None)
    frame, _ = make_eval_day(seed=4)
    bad = register_run(
        ws,
        make_run(scores=with_scores(frame, np.random.default_rng(0).uniform(0.03, 0.09, len(frame)))),
        None,
    )
    for version, expected in ((good, 0), (bad, 1)):
        assert main(["gate", "--candidate", version, "--home", home, "--json"]) == expected
    capsys.readouterr()
    decide = ["decide", "--end", "2026-01-21", "--home", home, "--json"]

    code, promote = ranker(capsys, *decide, "--candidate", good, "--run-id", "day-1")
    assert code == 0 and (promote["branch"], promote["force"]) == ("promote", False)
    assert promote["reason"] == "gate passed for window ending 2026-01-21 (run day-1)"
    recorded = json.loads(ws.step_summary_path("day-1", "decide").read_text())
    assert recorded["branch"] == "promote" and recorded["step"] == "decide" and recorded["exit_code"] == 0

    code, reject = ranker(capsys, *decide, "--candidate", bad)
    assert code == 0 and reject["branch"] == "record_rejection"
    assert "save_hit_at_3_floor" in reject["reason"] and reject["failed_checks"] == ["save_hit_at_3_floor"]
    code, forced = ranker(capsys, *decide, "--candidate", bad, "--force-promote", "--reason", "incident 7")
    assert code == 0 and (forced["branch"], forced["force"]) == ("promote", True)
    code, dry = ranker(capsys, *decide, "--candidate", good, "--dry-run")
    assert code == 0 and (dry["branch"], dry["force"]) == ("keep_champion", False)

    # acting on the answer: once good is champion, a second passing candidate for the date is kept out
    assert main(["promote", good, "--reason", promote["reason"], "--home", home, "--json"]) == 0
    other = register_run(ws, make_run(), None)
    capsys.readouterr()
    # (gating against the champion would score its checkpoint; these runs hold fake weights)
    Registry.for_workspace(ws).record_verdict(
        other, Verdict(decision="pass", failed_checks=[], eval_date="2026-01-21", champion_version=good)
    )
    code, kept = ranker(capsys, *decide, "--candidate", other)
    assert code == 0 and kept["branch"] == "keep_champion" and kept["champion_trained_for"] == "2026-01-21"

    assert main(["decide", "--candidate", good, "--end", "2026-01-21", "--home", home]) == 0
    assert capsys.readouterr().out.startswith(
        "keep_champion: the champion was already trained for 2026-01-21"
    )


def test_decide_errors_are_one_line_and_exit_2(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = Workspace(tmp_path / "home")
    home = str(ws.root)
    version = register_run(ws, make_run(), None)
    base = ["decide", "--candidate", version, "--end", "2026-01-21", "--home", home]
    assert main(base) == 2
    assert "v0001 has not been through the gate" in capsys.readouterr().err
    assert main([*base, "--force-promote"]) == 2
    assert "--force-promote needs --reason" in capsys.readouterr().err
    assert main([*base, "--force-promote", "--reason", "x", "--dry-run"]) == 2
    assert "contradict" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["decide", "--candidate", version, "--home", home])  # --end is required
    assert exc.value.code == 2
