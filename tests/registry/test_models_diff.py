"""``ranker models diff A B``: two versions side by side, through `ranker`'s entry point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.core.workspace import Workspace
from ranking.registry import Registry, register_run
from ranking.registry.records import Verdict
from tests.trainer.conftest import manifest, model_config, train_request, window_home

__all__ = ["manifest", "model_config", "window_home"]

RunFactory = Callable[..., Path]


def _diff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["models", "diff", *argv, "--json"])
    out = capsys.readouterr().out.strip()
    return code, (json.loads(out.splitlines()[-1]) if out else {})


def test_two_trained_versions_differ_in_epochs_and_metrics(
    tmp_path: Path,
    manifest,  # type: ignore[no-untyped-def]
    model_config,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ranking.trainer.loop import run_training

    ws = Workspace(tmp_path / "home")
    versions = []
    for epochs in (1, 2):
        run_dir = tmp_path / f"run-{epochs}"
        run_training(train_request(manifest, model_config, run_dir, schedule="joint", epochs=epochs))
        versions.append(register_run(ws, run_dir, f"day-{epochs}"))
    a, b = versions
    code, diff = _diff(capsys, a, b, "--home", str(ws.root))
    assert code == 0, diff
    assert (diff["a"], diff["b"]) == (a, b)
    differing = {r["key"]: (r["a"], r["b"]) for r in diff["config"]["differing"]}
    assert differing["recipe.epochs"] == (1, 2)
    assert "model.embedding_dim" not in differing and diff["config"]["equal"] > 0
    assert all(r["a"] != r["b"] for r in diff["config"]["differing"])

    reg = Registry(str(ws.registry))
    ea, eb = reg.record(a).eval, reg.record(b).eval
    hit = next(m for m in diff["metrics"] if m["name"] == "save_hit_at_3")
    assert (hit["a"], hit["b"]) == (ea["save_hit_at_3"], eb["save_hit_at_3"])
    assert hit["delta"] == pytest.approx(eb["save_hit_at_3"] - ea["save_hit_at_3"])
    assert hit["relative"] == pytest.approx(hit["delta"] / ea["save_hit_at_3"])
    data = {r["key"]: r for r in diff["data"]}
    assert data["window id"]["same"] and data["window id"]["a"] == manifest.window_id
    assert data["rows (train)"]["a"] == manifest.train_rows
    lineage = {r["key"]: (r["a"], r["b"]) for r in diff["lineage"]}
    assert lineage["run id"] == ("day-1", "day-2")
    # trained outside `ranker train`: no effective_config.json on either side
    assert diff["missing"] == {"a": ["effective_config.json"], "b": ["effective_config.json"]}
    assert (
        diff["gate"]["checks"] == []
        and {r["key"]: r["a"] for r in diff["gate"]["verdict"]}["decision"] is None
    )

    assert main(["models", "diff", a, b, "--home", str(ws.root)]) == 0
    text = capsys.readouterr().out
    assert "recipe.epochs" in text and "model.embedding_dim" not in text
    assert f"{a} lacks effective_config.json" in text


def _effective(epochs: int) -> str:
    return json.dumps(
        {
            "config": {"train": {"epochs": epochs, "batch_size": 256}},
            "sources": {"train.epochs": "flag", "train.batch_size": "default"},
            "files": [],
        }
    )


def _gated(reg: Registry, version: str, hit: float, passed: bool) -> None:
    check = {"name": "save_hit_at_3_floor", "passed": passed, "value": hit, "threshold": 0.3, "detail": ""}
    reg.record_verdict(
        version,
        Verdict.model_validate(
            {
                "decision": "pass" if passed else "reject",
                "failed_checks": [] if passed else ["save_hit_at_3_floor"],
                "checks": [check],
            }
        ),
    )


def test_config_sources_gate_checks_and_a_missing_file(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = Workspace(tmp_path / "home")
    run_a, run_b = make_run(), make_run()
    (run_a / "effective_config.json").write_text(_effective(2))
    (run_b / "effective_config.json").write_text(_effective(3))
    (run_b / "curve.png").unlink()
    a, b = register_run(ws, run_a, "r-a"), register_run(ws, run_b, "r-b")
    reg = Registry(str(ws.registry))
    _gated(reg, a, 0.35, True)
    _gated(reg, b, 0.25, False)

    code, diff = _diff(capsys, a, b, "--home", str(ws.root))
    assert code == 0
    assert set(diff) >= {"registry", "a", "b", "missing", "config", "data", "metrics", "gate", "lineage"}
    rows = {r["key"]: r for r in diff["config"]["differing"]}
    assert (rows["config.train.epochs"]["a"], rows["config.train.epochs"]["b"]) == (2, 3)
    assert rows["config.train.epochs"]["a_source"] == "flag"
    assert "config.train.batch_size" not in rows  # equal: counted, not listed
    assert set(rows) == {"config.train.epochs", "recipe.seed"}  # make_run seeds each run differently
    (check,) = diff["gate"]["checks"]
    assert check["name"] == "save_hit_at_3_floor"
    assert check["a"] == {"passed": True, "value": 0.35, "threshold": 0.3}
    assert check["b"] == {"passed": False, "value": 0.25, "threshold": 0.3}
    decision = next(r for r in diff["gate"]["verdict"] if r["key"] == "decision")
    assert (decision["a"], decision["b"], decision["same"]) == ("pass", "reject", False)

    # a version whose registered files lack one the diff reads shows "-" for it
    (ws.registry / "versions" / b / "effective_config.json").unlink()
    record = json.loads((ws.registry / "versions" / b / "version.json").read_text())
    del record["files"]["effective_config.json"]
    (ws.registry / "versions" / b / "version.json").write_text(json.dumps(record))
    code, diff = _diff(capsys, a, b, "--home", str(ws.root))
    assert code == 0 and diff["missing"]["b"] == ["effective_config.json"]
    rows = {r["key"]: r for r in diff["config"]["differing"]}
    assert rows["config.train.batch_size"]["b"] is None and rows["config.train.batch_size"]["a"] == 256
    assert main(["models", "diff", a, b, "--home", str(ws.root)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "config.train.batch_size" in x)
    assert line.split()[-1] == "-" and "FAIL" in text and "pass" in text


def test_an_unknown_version_is_one_line_exit_2(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = Workspace(tmp_path / "home")
    a = register_run(ws, make_run(), None)
    assert main(["models", "diff", a, "v0042", "--home", str(ws.root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown version v0042" in err[0]
    with pytest.raises(SystemExit) as exc:
        main(["models", "diff", a, "../x", "--home", str(ws.root)])
    assert exc.value.code == 2
