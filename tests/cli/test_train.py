"""``ranker train``: the command line becomes one TrainJob; a run end to end through the CLI
(run folder, one JSON summary, evaluate agrees); errors are one line and exit 2."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ranking.cli.main import build_parser
from ranking.cli.train import train_job
from ranking.config.model import PipelineConfig
from ranking.core.errors import RankerError
from ranking.trainer.checkpointing.checkpoint import load_checkpoint
from ranking.trainer.job import TrainJob, job_from_json, job_to_json, worker_job
from tests.trainer.conftest import DAYS, END, ranker_cmd, ranker_env

EPOCH_FIELDS = {
    "epoch",
    "phase",
    "loss",
    "samples_per_second",
    "lookup_ratio",
    "exposed_lookup_ratio",
    "duration_seconds",
}


def _job(*argv: str) -> TrainJob:
    return train_job(build_parser().parse_args(["train", *argv]))


def test_the_command_line_becomes_one_train_job(tmp_path: Path) -> None:
    # the config's default recipe (F,J from the base) reaches the job: every [recipe] key, and the
    # window's days (TrainJob has no defaults of its own for them)
    defaults = PipelineConfig()
    plain = _job("--home", str(tmp_path), "--end", "2026-11-10")
    assert plain.days == defaults.window.days
    for key in (
        "schedule",
        "epochs",
        "pipeline",
        "warm_start",
        "warm_start_scope",
        "seed",
        "batch_size",
        "remedy",
    ):
        assert getattr(plain, key) == getattr(defaults.recipe, key), key
    job = _job(
        *("--home", str(tmp_path), "--end", "2026-11-10", "--days", "5", "--schedule", "F,J"),
        *("--pipeline", "sync", "--warm-start", "none", "--warm-start-scope", "dense"),
        *("--out", "runs/x", "--run-id", "r-1", "--resume", "--nproc", "2", "--seed", "7"),
        *("--batch-size", "64", "--shuffle-buffer", "0", "--model-config", "cfg.json", "--threads", "3"),
        *("--no-eval-each-epoch", "--no-register", "--no-progress", "--epochs", "2"),
    )
    assert job == dataclasses.replace(
        plain,
        days=5,
        schedule="F,J",
        epochs=2,
        pipeline="sync",
        warm_start="none",
        warm_start_scope="dense",
        out=Path("runs/x"),
        run_id="r-1",
        resume=True,
        nproc=2,
        seed=7,
        batch_size=64,
        shuffle_buffer=0,
        model_config=Path("cfg.json").resolve(),  # the config records the file by its full path
        threads=3,
        eval_each_epoch=False,
        register=False,
        progress=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("--epochs", "2", "--threads", "2", "--model-config", "cfg.json", "--resume"),
        ("--no-eval-each-epoch", "--no-progress", "--schedule", "joint", "--pipeline", "sync"),
    ],
)
def test_a_worker_reads_back_the_job_it_was_launched_with(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """What torchrun's workers get (the job serialized into the run folder, not a command line)
    reads back to the same job, through JSON."""
    job = _job("--home", str(tmp_path), "--end", "2026-11-10", "--nproc", "3", *argv)
    worker = worker_job(job, tmp_path / "runs" / "r", tmp_path / "champion" / "model.pt")
    assert job_from_json(job_to_json(worker)) == worker


def test_a_job_file_missing_a_recipe_key_or_with_an_unknown_one_is_one_error(tmp_path: Path) -> None:
    """TrainJob has no defaults for what the recipe decides: a job file without one is refused
    (a RankerError: the worker's one line, exit 2), not a TypeError (a crash)."""
    raw = json.loads(job_to_json(_job("--home", str(tmp_path), "--end", "2026-11-10")))
    with pytest.raises(RankerError, match=r"not a train job: missing \['batch_size'\]"):
        job_from_json(json.dumps({k: v for k, v in raw.items() if k != "batch_size"}))
    with pytest.raises(RankerError, match=r"not a train job: unknown keys \['lr'\]"):
        job_from_json(json.dumps({**raw, "lr": 0.1}))
    with pytest.raises(RankerError, match=r"not a train job: end: "):
        job_from_json(json.dumps({**raw, "end": "someday"}))


@pytest.mark.slow
def test_cli_train_writes_the_run_folder_and_evaluate_agrees(
    tmp_path: Path, window_home: Path, model_config_file: Path
) -> None:
    run_dir = tmp_path / "run"
    common = ["--home", str(window_home), "--json"]
    proc = subprocess.run(
        ranker_cmd(
            "train",
            *common,
            "--end",
            END.isoformat(),
            "--days",
            str(DAYS),
            "--epochs",
            "2",
            "--batch-size",
            "256",
            "--warm-start",
            "none",
            "--no-register",
            "--model-config",
            str(model_config_file),
            "--out",
            str(run_dir),
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # stdout holds exactly one JSON object
    assert summary["step"] == "train" and summary["schedule"] == "F,J" and summary["pipeline"] == "semisync"
    assert summary["version"] is None and summary["warm_start"]["source"] == "none"
    assert [e["phase"] for e in summary["epochs"]] == ["frozen", "joint"]
    for e in summary["epochs"]:
        assert set(e) >= EPOCH_FIELDS
        assert e["samples_per_second"] > 0 and 0 <= e["lookup_ratio"] <= 1
    assert set(summary["lookup_ratio_by_phase"]) == {"frozen", "joint"}
    assert summary["window"]["window_id"] and summary["window"]["rows_train"] > 0
    assert {"save_hit_at_3", "auc", "ne"} <= set(summary["eval"])
    # progress went to stderr as JSON lines (not a TTY)
    events = [json.loads(x) for x in proc.stderr.splitlines() if x.startswith('{"')]
    assert [e["epoch"] for e in events if e["event"] == "epoch_end"] == [1, 2]

    for name in (
        "model.pt",
        "model.pt.sha256",
        "model_config.json",
        "train_manifest.json",
        "eval.json",
        "eval_scores.parquet",
        "curve.png",
        "checkpoints/epoch-1/.metadata",
        "checkpoints/epoch-1/meta.json",
        "checkpoints/epoch-2/__0_0.distcp",
        "checkpoints/epoch-2.sha256",
    ):
        assert (run_dir / name).is_file(), name
    final = load_checkpoint(run_dir / "model.pt")  # the one loader: format 3 rebuilds its compact tables
    assert final["epoch"] == 2 and "sparse_arch.embedding_bags.t_pin_id.weight" in final["model"]
    # the export keeps the tables' fused optimizer state and the dense optimizer (warm-start carry)
    assert set(final["table_optimizer"]) == {
        f"model.sparse_arch.embedding_bags.{t}.weight::{t}.momentum1"
        for t in ("t_user_id", "t_pin_id", "t_user_stats_country", "t_pin_stats_category")
    }
    assert final["dense_optimizer"]["state"] and final["dense_optimizer"]["param_groups"]
    scores = pd.read_parquet(run_dir / "eval_scores.parquet")
    assert list(scores.columns) == ["request_id", "pin_id", "saved", "score"]
    assert len(scores) == summary["window"]["rows_eval"]
    assert scores["score"].between(0, 1).all()
    eval_json = json.loads((run_dir / "eval.json").read_text())
    assert eval_json["save_hit_at_3"] == pytest.approx(summary["eval"]["save_hit_at_3"])
    manifest = json.loads((run_dir / "train_manifest.json").read_text())
    assert manifest["window_id"] == summary["window"]["window_id"] and manifest["seed"] == 0

    proc = subprocess.run(
        ranker_cmd("evaluate", *common, "--model", str(run_dir), "--end", END.isoformat()),
        capture_output=True,
        text=True,
        timeout=300,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    evaluated = json.loads(proc.stdout)
    assert evaluated["step"] == "evaluate"
    for key in ("save_hit_at_3", "auc", "ne"):
        assert evaluated["metrics"][key] == pytest.approx(summary["eval"][key], abs=1e-6)


def test_cli_errors_are_one_line_exit_2(
    tmp_path: Path, window_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.cli.main import main

    rc = main(
        ["train", "--home", str(tmp_path), "--end", "2026-11-10", "--warm-start", "none", "--no-register"]
    )
    assert rc == 2
    assert "no window manifest" in capsys.readouterr().err
    rc = main(
        [
            "train",
            "--home",
            str(window_home),
            "--end",
            "2026-11-10",
            "--days",
            "3",
            "--schedule",
            "F,J",
            "--epochs",
            "3",
            "--warm-start",
            "none",
        ]
    )
    assert rc == 2
    # checked with the pipeline config, which names the key and where the value came from
    assert (
        "recipe.epochs: must equal the length of schedule F,J (2) (got 3) [flag]" in capsys.readouterr().err
    )
    rc = main(
        [
            "train",
            "--home",
            str(window_home),
            "--end",
            "2026-11-10",
            "--days",
            "3",
            "--warm-start",
            str(tmp_path / "x.pt"),
        ]
    )
    assert rc == 2
    assert "no checkpoint at" in capsys.readouterr().err


def test_cli_refuses_a_window_built_with_other_feature_definitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from features.windowgen import write_window
    from ranking.cli.main import main

    write_window(tmp_path, END, 2, 300, feature_version="0123456789abcdef")
    rc = main(
        [
            "train",
            "--home",
            str(tmp_path),
            "--end",
            END.isoformat(),
            "--days",
            "2",
            "--warm-start",
            "none",
            "--no-register",
        ]
    )
    assert rc == 2
    assert "was built with feature definitions '0123456789abcdef'" in capsys.readouterr().err
    # no run folder: only the lock the refused job held beside where it would have been
    runs = tmp_path / "runs"
    assert [p.name for p in runs.iterdir() if not p.name.endswith(".train.lock")] == []
