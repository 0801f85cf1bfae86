"""The config reaches the steps: `ranker train` records the effective config (values and sources)
in the run folder and the registry version, applies the config's optimizers, and `ranker run
--config FILE` hands the file to every step (slow: real training on a tiny workspace)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.registry import Registry


@pytest.fixture(scope="module")
def tiny_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from features.testing import make_tiny_workspace

    home = tmp_path_factory.mktemp("cfg") / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=6, window_days=4)
    return home


def _last_json(capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_train_records_the_effective_config_and_uses_its_optimizers(
    tiny_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tiny_home / "ranker.toml"
    config.write_text(
        '[window]\ndays = 4\n[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\n'
        'batch_size = 128\n[recipe.table_optimizer]\nname = "rowwise_adagrad"\nlr = 0.02\n'
    )
    try:
        out = tiny_home / "runs" / "cfg-train"
        code = main(["train", "--home", str(tiny_home), "--end", "2026-01-06", "--seed", "3",
                     "--out", str(out), "--no-progress", "--json"])  # fmt: skip
        summary = _last_json(capsys)
        assert code == 0, summary
    finally:
        config.unlink()
    recorded = json.loads((out / "effective_config.json").read_text())
    assert summary["effective_config"] == str(out / "effective_config.json")
    assert recorded["config"]["recipe"]["epochs"] == 1 and recorded["config"]["recipe"]["seed"] == 3
    assert recorded["sources"]["recipe.epochs"] == f"file:{config}"
    assert recorded["sources"]["recipe.seed"] == "flag"
    assert recorded["sources"]["recipe.pipeline"] == "default"
    assert recorded["files"] == [str(config)]
    manifest = json.loads((out / "train_manifest.json").read_text())
    assert len(manifest["epochs"]) == 1 and manifest["warm_start"]["source"] == "none"
    model_config = json.loads((out / "model_config.json").read_text())
    assert model_config["table_optimizer"]["lr"] == 0.02
    # the registry keeps it with the version
    version = summary["version"]
    kept = json.loads(Registry(str(tiny_home / "registry")).read_file(version, "effective_config.json"))
    assert kept == recorded


@pytest.mark.slow
def test_run_hands_its_config_file_to_every_step(
    tiny_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "elsewhere.toml"
    config.write_text(
        '[window]\ndays = 4\n[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\nbatch_size = 128\n'
        "[gate]\nmin_lift_over_random = 0.0\ncalibration_low = 0.01\ncalibration_high = 100.0\n"
    )
    registry = tmp_path / "registry"
    code = main(["run", "--home", str(tiny_home), "--end", "2026-01-06", "--config", str(config),
                 "--registry", str(registry), "--run-id", "cfg-run", "--json"])  # fmt: skip
    summary = _last_json(capsys)
    assert code in (0, 1), summary
    steps = tiny_home / "pipeline" / "cfg-run"
    window = json.loads((steps / "window.json").read_text())
    assert window["days"] == 4
    train = json.loads((steps / "train.json").read_text())
    recorded = json.loads(Path(train["effective_config"]).read_text())
    assert recorded["files"] == [str(config)]
    assert recorded["sources"]["recipe.warm_start"] == f"file:{config}"
    assert [e["phase"] for e in train["epochs"]] == ["joint"]
    gate = json.loads((steps / "gate.json").read_text())
    assert gate["config"]["calibration_high"] == 100.0 and gate["config"]["min_lift_over_random"] == 0.0
