"""`ranker run --run-id R` twice: an unfinished attempt is resumed (its summaries archived, a
registered train reused, never a mix of two attempts); a finished one is refused cleanly."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.core.errors import RankerError
from ranking.pipeline.run import prepare_rerun


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_finished_run_id_is_refused_and_nothing_is_touched(tmp_path: Path) -> None:
    folder = tmp_path / "pipeline" / "R"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"exit_code": 1, "decision": "reject", "version": "v0007"}))
    (folder / "reject.json").write_text("{}")
    with pytest.raises(RankerError, match=r"run R already finished \(gate reject, version v0007, exit 1\)"):
        prepare_rerun(str(tmp_path), "R", None)
    assert sorted(p.name for p in folder.iterdir()) == ["reject.json", "run.json"]


def test_an_unfinished_attempt_is_archived(tmp_path: Path) -> None:
    folder = tmp_path / "pipeline" / "R"
    (folder / "failures").mkdir(parents=True)
    (folder / "freshness.json").write_text("{}")  # the caller's, before `ranker run`: stays
    (folder / "window.json").write_text("{}")
    (folder / "train.json").write_text(json.dumps({"exit_code": 2, "error": "disk full"}))
    (folder / "failures" / "train.json").write_text("{}")
    rerun = prepare_rerun(str(tmp_path), "R", None)
    assert rerun is not None and rerun.attempt == 2 and rerun.train is None
    assert sorted(p.name for p in folder.glob("*.json")) == ["freshness.json"]
    assert not list((folder / "failures").iterdir())
    archived = folder / "attempts" / "1"
    assert sorted(str(p.relative_to(archived)) for p in archived.rglob("*.json")) == [
        "failures/train.json",
        "train.json",
        "window.json",
    ]
    assert prepare_rerun(str(tmp_path), "R", None) is None  # nothing left of it to archive


@pytest.mark.slow
def test_a_rerun_resumes_the_failed_attempt_and_a_finished_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace
    from ranking.monitoring.runs import load_run
    from ranking.pipeline import steps

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    argv = ["run", "--end", "2026-01-06", "--days", "4", "--epochs", "1", "--home", str(home), "--json",
            "--run-id", "R", "--force-promote", "--reason", "bootstrap"]  # fmt: skip
    folder = home / "pipeline" / "R"

    real_gate = steps.gate

    def gate_fails(request: object) -> object:
        raise RankerError("the gate could not read the eval day (injected)")

    monkeypatch.setattr(steps, "gate", gate_fails)
    code, first = _run(capsys, *argv)
    assert code == 2 and first["failed_step"] == "gate" and first["version"] == "v0001"
    monkeypatch.setattr(steps, "gate", real_gate)

    code, second = _run(capsys, *argv)
    assert code == 0, second
    assert (second["attempt"], second["version"], second["promoted"]) == (2, "v0001", True)
    assert [s["step"] for s in second["steps"]][:6] == [
        "window",
        "validate",
        "train",
        "gate",
        "decide",
        "promote",
    ]
    versions = sorted(p.name for p in (home / "registry" / "versions").iterdir())
    assert versions == ["v0001"]  # the registered train was reused, not trained and registered again
    summaries = {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
    assert {"window", "train", "gate", "promote", "run"} <= set(summaries) and "reject" not in summaries
    assert summaries["gate"]["candidate"]["version"] == "v0001" and "error" not in summaries["gate"]
    assert summaries["run"]["attempt"] == 2 and "error" not in summaries["run"]
    archived = folder / "attempts" / "1"
    assert json.loads((archived / "run.json").read_text())["failed_step"] == "gate"
    assert "injected" in json.loads((archived / "gate.json").read_text())["error"]
    assert load_run(Workspace.resolve(home), "R").status == "success"

    run_json = (folder / "run.json").read_bytes()
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2 and "run R already finished" in captured.err
    assert (folder / "run.json").read_bytes() == run_json
    assert sorted(p.name for p in (home / "registry" / "versions").iterdir()) == ["v0001"]


@pytest.mark.slow
def test_attempts_killed_between_registry_and_summary_leave_one_version_and_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 after the version is registered but before train.json, then after the champion
    event but before promote.json (issue 32, items 2 and 3): the re-runs register no second version
    and finish, instead of failing forever on "already is the champion"."""
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace
    from ranking.pipeline import steps
    from ranking.registry import Registry

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    argv = ["run", "--end", "2026-01-06", "--days", "4", "--epochs", "1", "--home", str(home), "--json",
            "--run-id", "K"]  # fmt: skip
    folder = home / "pipeline" / "K"
    real_gate = steps.gate

    def killed(request: object) -> object:
        raise RankerError("killed (injected)")

    # attempt 1 registers v0001, then "dies" at the gate; its train summary is lost as a kill
    # before it was written would lose it
    monkeypatch.setattr(steps, "gate", killed)
    code, first = _run(capsys, *argv)
    assert code == 2 and first["version"] == "v0001"
    (folder / "train.json").unlink()
    monkeypatch.setattr(steps, "gate", real_gate)
    code, second = _run(capsys, *argv)
    assert code == 0 and second["version"] == "v0001" and second["promoted"], second
    reg = Registry(str(home / "registry"))
    assert reg.version_ids() == ["v0001"] and reg.champion() == "v0001"

    # attempt 2 "died" after the champion event, before promote.json and run.json
    (folder / "promote.json").unlink()
    (folder / "run.json").unlink()
    code, third = _run(capsys, *argv)
    assert code == 0, third
    assert (third["version"], third["promoted"], third["decision"]) == ("v0001", True, "pass")
    assert "gate" not in [s["step"] for s in third["steps"]]  # not re-gated against itself
    assert reg.version_ids() == ["v0001"] and [e.to_version for e in reg.history()] == ["v0001"]
