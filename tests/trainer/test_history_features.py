"""``[recipe] history_features`` (issue 34): the model reads the user x pin and user x category
history columns when the recipe says so; a warm start, a model file or a window that disagrees is
refused in one line before anything is written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from jobs import job_for

from features.schema import DENSE_FEATURES, HISTORY_FEATURES
from ranking.cli.main import build_parser, main
from ranking.cli.train import train_job as cli_train_job
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.hashing import sha256_file
from ranking.core.workspace import Workspace
from ranking.trainer.datasets.window import validate_window
from ranking.trainer.job import resolve_model_config, run_train_job
from ranking.trainer.models.config import (
    default_dense_features,
    default_model_config,
    load_model_config,
    reads_history,
)
from tests.trainer.conftest import DAYS, END, train_request


@pytest.fixture(scope="module")
def history_config(model_config):  # type: ignore[no-untyped-def]
    """The small test model reading the history columns too."""
    return dataclasses.replace(model_config, dense_features=default_dense_features(True))


@pytest.fixture(scope="module")
def trained_history(tmp_path_factory: pytest.TempPathFactory, manifest, history_config) -> Path:  # type: ignore[no-untyped-def]
    """A one-epoch run of the history model on the windowgen window (read-only)."""
    from ranking.trainer.loop import run_training

    run_dir = tmp_path_factory.mktemp("history") / "run"
    run_training(train_request(manifest, history_config, run_dir, schedule="joint", epochs=1))
    return run_dir


def _home(tmp_path: Path, recipe: str = "") -> Workspace:
    home = tmp_path / "home"
    home.mkdir(parents=True)
    if recipe:
        (home / "ranker.toml").write_text(f"[recipe]\n{recipe}\n")
    return Workspace(home)


def test_the_default_model_reads_the_13_dense_features_and_25_with_the_history() -> None:
    plain = default_model_config()
    assert plain.dense_features == DENSE_FEATURES and len(plain.dense_features) == 13
    assert not reads_history(plain)
    history = default_model_config(history_features=True)
    assert len(history.dense_features) == 25 and reads_history(history)
    assert history.dense_features == (*DENSE_FEATURES, *HISTORY_FEATURES)
    # nothing else of the architecture moves
    assert dataclasses.replace(history, dense_features=plain.dense_features) == plain


def test_the_recipe_key_reaches_the_job_and_its_model(tmp_path: Path) -> None:
    off = _home(tmp_path / "off")
    job = job_for(off, END)
    assert job.history_features is False
    assert resolve_model_config(job, tmp_path / "run", None).dense_features == DENSE_FEATURES
    on = _home(tmp_path / "on", "history_features = true")
    job = job_for(on, END)
    assert job.history_features is True
    assert resolve_model_config(job, tmp_path / "run", None).dense_features == (
        *DENSE_FEATURES,
        *HISTORY_FEATURES,
    )


def test_the_train_flag_sets_the_key_over_the_config_file(tmp_path: Path) -> None:
    ws = _home(tmp_path, "history_features = true")
    common = ["train", "--home", str(ws.root), "--end", END.isoformat()]
    assert cli_train_job(build_parser().parse_args(common)).history_features is True
    assert (
        cli_train_job(build_parser().parse_args([*common, "--no-history-features"])).history_features is False
    )
    plain = _home(tmp_path / "plain")
    flagged = ["train", "--home", str(plain.root), "--end", END.isoformat(), "--history-features"]
    job = cli_train_job(build_parser().parse_args(flagged))
    assert job.history_features is True
    assert job.effective_config is not None
    assert job.effective_config["sources"]["recipe.history_features"] == "flag"


def test_a_history_model_trains_on_a_windowgen_window(trained_history: Path, history_config) -> None:  # type: ignore[no-untyped-def]
    from ranking.trainer.checkpointing.checkpoint import load_checkpoint

    assert load_model_config(trained_history / "model_config.json") == history_config
    state = load_checkpoint(trained_history / "model.pt")["model"]
    widths = {tuple(v.shape) for k, v in state.items() if k.startswith("dense_arch") and k.endswith("weight")}
    # the dense tower's first layer takes one input per dense feature: the 12 history columns were read
    assert any(shape[1] == len(history_config.dense_features) for shape in widths), widths


@pytest.mark.parametrize("history_features", [True, False])
def test_a_warm_start_trained_otherwise_is_refused_before_anything_is_written(
    window_home: Path, tmp_path: Path, trained: Path, trained_history: Path, history_features: bool
) -> None:
    # the recipe asks for the history, the warm start was trained without it (and the other way)
    warm = trained if history_features else trained_history
    job = job_for(
        Workspace(window_home),
        END,
        days=DAYS,
        warm_start=str(warm),
        history_features=history_features,
        register=False,
        out=tmp_path / "run",
    )
    trained_as = "without" if history_features else "with"
    with pytest.raises(RankerError, match=f"trained {trained_as} the history features") as refused:
        run_train_job(job)
    message = str(refused.value)
    assert "\n" not in message and f"history_features = {str(history_features).lower()}" in message
    assert "retrain the base with the same setting" in message
    assert not (tmp_path / "run").exists()


def test_the_command_line_refuses_a_mismatched_warm_start_with_exit_2(
    window_home: Path, tmp_path: Path, trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--home",
            str(window_home),
            "--end",
            END.isoformat(),
            "--days",
            str(DAYS),
            "--history-features",
            "--warm-start",
            str(trained),
            "--out",
            str(out),
            "--no-register",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert "retrain the base" in err[-1] and "history features" in err[-1]


def test_a_model_file_must_agree_with_the_recipe(tmp_path: Path, model_config, history_config) -> None:  # type: ignore[no-untyped-def]
    plain_file, history_file = tmp_path / "plain.json", tmp_path / "history.json"
    plain_file.write_text(model_config.to_json())
    history_file.write_text(history_config.to_json())
    ws = _home(tmp_path)
    run_dir = tmp_path / "run"

    def resolved(path: Path, history_features: bool):  # type: ignore[no-untyped-def]
        job = job_for(ws, END, model_config=path, history_features=history_features, warm_start="none")
        return resolve_model_config(job, run_dir, None)

    assert resolved(plain_file, False) == model_config
    assert resolved(history_file, True) == history_config
    with pytest.raises(RankerError, match="reads no history feature"):
        resolved(plain_file, True)
    with pytest.raises(RankerError, match=r"reads history features, but recipe\.history_features = false"):
        resolved(history_file, False)
    # a file naming only some history columns is a model that reads history: the file decides which
    some = dataclasses.replace(model_config, dense_features=(*DENSE_FEATURES, HISTORY_FEATURES[0]))
    (tmp_path / "some.json").write_text(some.to_json())
    assert resolved(tmp_path / "some.json", True) == some


def test_a_warm_start_reading_other_dense_features_than_the_model_file_is_refused(
    tmp_path: Path, trained: Path, history_config
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "history.json").write_text(history_config.to_json())
    job = job_for(
        _home(tmp_path),
        END,
        model_config=tmp_path / "history.json",
        history_features=True,
        warm_start=str(trained),
    )
    with pytest.raises(RankerError, match=r"reads 13 dense features, model file .* 25") as refused:
        resolve_model_config(job, tmp_path / "run", trained / "model.pt")
    assert "retrain the base with the same model file" in str(refused.value)


def _without_history(manifest, folder: Path):  # type: ignore[no-untyped-def]
    """The window as a builder before issue 34 wrote it: every partition without the history
    columns (and recorded as such)."""

    def strip(part):  # type: ignore[no-untyped-def]
        path = folder / f"{part.date}.parquet"
        table = pq.read_table(part.path)
        pq.write_table(table.drop_columns([c for c in HISTORY_FEATURES if c in table.column_names]), path)
        return part.model_copy(
            update={"path": path, "bytes": path.stat().st_size, "sha256": sha256_file(path)}
        )

    folder.mkdir()
    return manifest.model_copy(
        update={"train": tuple(strip(p) for p in manifest.train), "eval": strip(manifest.eval)}
    )


def test_a_window_built_before_the_history_columns(
    tmp_path: Path, manifest, model_config, history_config
) -> None:  # type: ignore[no-untyped-def]
    old = _without_history(manifest, tmp_path / "old")
    validate_window(old, model_config)  # with the knob off nothing changes
    with pytest.raises(DataValidationError, match="lacks the history features") as refused:
        validate_window(old, history_config)
    message = str(refused.value)
    assert "\n" not in message and "rebuild it (ranker features window)" in message
    validate_window(manifest, history_config)  # today's window carries them
