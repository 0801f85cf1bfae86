"""`ranker train` on bad input (issue 25.9, .11, .13): an ``--out`` that is a file, a partition
swapped since its window recorded it, more workers than the machine runs. Each is one line and
exit 2, with nothing trained, launched or registered."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from features.window import read_window_manifest
from features.windowgen import day_table, write_window
from ranking.cli.main import main
from ranking.core.errors import DataValidationError
from ranking.core.hashing import sha256_file
from ranking.trainer.datasets.window import validate_window
from ranking.trainer.models.config import default_model_config

END = dt.date(2026, 11, 10)
DAYS = 2
TABLE_ROWS = {"user_id": 256, "pin_id": 512, "user_stats__country": 16, "pin_stats__category": 16}


def _one_line(err: str) -> str:
    lines = [
        line for line in err.splitlines() if line.strip() and " INFO " not in line and " WARNING " not in line
    ]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A window whose manifest records each partition's size and sha256, as the window builder's does."""
    home = tmp_path / "home"
    manifest_path = write_window(home, END, DAYS, 600, seed=3, row_group_size=200, eval_rows=400)
    manifest = json.loads(manifest_path.read_text())
    for part in [*manifest["train"], manifest["eval"]]:
        path = Path(part["path"])
        part["bytes"], part["sha256"] = path.stat().st_size, sha256_file(path)
    manifest_path.write_text(json.dumps(manifest))
    return home


@pytest.fixture
def model_config_file(tmp_path: Path) -> Path:
    cfg = default_model_config(embedding_dim=4, table_rows=TABLE_ROWS, dense_arch=(8,), over_arch=(8,))
    path = tmp_path / "model_config.json"
    path.write_text(cfg.to_json())
    return path


def _train(home: Path, cfg: Path, *extra: str) -> int:
    return main(
        ["train", "--home", str(home), "--end", END.isoformat(), "--days", str(DAYS), "--epochs", "1",
         "--batch-size", "128", "--warm-start", "none", "--no-progress", "--model-config", str(cfg),
         *extra]
    )  # fmt: skip


def test_out_naming_a_file_is_one_line_and_writes_nothing(
    home: Path, model_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """25.9: was exit 70 (FileExistsError from mkdir) after the window had been read."""
    out = tmp_path / "a-file"
    out.write_text("keep me")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _train(home, model_config_file, "--out", str(out)) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("ranker train: error: ") and str(out) in line and "not a folder" in line
    assert out.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (home / "registry").exists() and not (home / "runs").exists()


def _swap_first_partition(home: Path) -> Path:
    """Replace the first training partition by another valid one with as many rows (another
    seed's day): only its size and sha256 tell it from the one the window recorded."""
    manifest = json.loads(next((home / "windows").glob("*/manifest.json")).read_text())
    part = Path(manifest["train"][0]["path"])
    rows = pq.read_metadata(part).num_rows
    day = dt.date.fromisoformat(manifest["train"][0]["date"])
    pq.write_table(day_table(day, rows, seed=11), part, row_group_size=200)
    assert pq.read_metadata(part).num_rows == rows
    return part


@pytest.mark.parametrize("damage", ["swap", "flip"])
def test_a_partition_unlike_its_record_is_refused_by_the_trainer(damage: str, home: Path) -> None:
    manifest_path = next((home / "windows").glob("*/manifest.json"))
    cfg = default_model_config(table_rows=TABLE_ROWS)
    validate_window(read_window_manifest(manifest_path), cfg)  # as recorded: accepted
    if damage == "swap":
        part, why = _swap_first_partition(home), "bytes, recorded"
    else:  # one byte of the eval day, same size: only the checksum tells
        part = Path(json.loads(manifest_path.read_text())["eval"]["path"])
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 0xFF
        part.write_bytes(bytes(data))
        why = "another sha256 than recorded"
    with pytest.raises(DataValidationError, match="is not the one its window recorded") as exc:
        validate_window(read_window_manifest(manifest_path), cfg)
    assert str(part) in str(exc.value) and why in str(exc.value)


def test_standalone_train_on_a_swapped_partition_is_one_line_and_registers_nothing(
    home: Path, model_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """25.11: `ranker train` alone trained and registered on a swapped partition (only the window
    step compared partitions with their record)."""
    part = _swap_first_partition(home)
    assert _train(home, model_config_file, "--out", str(tmp_path / "run"), "--json") == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert str(part) in line and "ranker features window" in line, line
    assert json.loads(captured.out)["error_type"] == "DataValidationError"
    assert not (home / "registry" / "versions").exists() or not any(
        (home / "registry" / "versions").iterdir()
    )


def test_more_workers_than_the_machine_runs_are_refused_before_launching(
    home: Path, model_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """25.13: --nproc 64 on 2 cores started 64 workers (minutes) before anything failed."""
    import torch

    launched: list[list[str]] = []

    def fake_run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        launched.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(subprocess, "run", fake_run)
    out = tmp_path / "run"
    assert _train(home, model_config_file, "--out", str(out), "--nproc", "3") == 2
    line = _one_line(capsys.readouterr().err)
    assert "--nproc 3" in line and "at most 2 training processes" in line and "CPU core" in line, line
    assert launched == [] and not out.exists()


def test_the_process_limit_is_one_per_gpu_when_there_are_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from ranking.core.errors import RankerError
    from ranking.trainer.job import check_nproc, machine_processes

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert machine_processes() == (4, "4 visible GPU(s), one per process")
    check_nproc(4, *machine_processes())
    with pytest.raises(RankerError, match=r"--nproc 5: this machine runs at most 4 .*GPU"):
        check_nproc(5, *machine_processes())
    with pytest.raises(RankerError, match="exceeds 64"):
        check_nproc(65, 128, "many cores")
