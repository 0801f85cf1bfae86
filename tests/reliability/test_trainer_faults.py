"""Trainer faults: a full disk while checkpointing, corrupt partitions and checkpoints, --resume
into a finished run, non-finite optimizer settings. Each is one line and exit 2 from the CLI."""

from __future__ import annotations

import datetime as dt
import errno
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from faults import Tmpfs

from features.windowgen import write_window
from ranking.cli.main import main
from ranking.core.hashing import sha256_file
from ranking.trainer.checkpointing.checkpoint import (
    CheckpointError,
    checksum_path,
    load_checkpoint,
    save_checkpoint,
)
from ranking.trainer.models.config import ConfigError, default_model_config, load_model_config

END = dt.date(2026, 11, 10)
DAYS = 2
TABLE_ROWS = {"user_id": 256, "pin_id": 512, "user_stats__country": 16, "pin_stats__category": 16}


def _one_line(err: str) -> str:
    lines = [
        line for line in err.splitlines() if line.strip() and " INFO " not in line and " WARNING " not in line
    ]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    write_window(home, END, DAYS, 600, seed=3, row_group_size=200, eval_rows=400)
    return home


@pytest.fixture(scope="module")
def model_config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cfg = default_model_config(embedding_dim=4, table_rows=TABLE_ROWS, dense_arch=(8,), over_arch=(8,))
    path = tmp_path_factory.mktemp("cfg") / "model_config.json"
    path.write_text(cfg.to_json())
    return path


def _train(home: Path, cfg: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "train",
            "--home",
            str(home),
            "--end",
            END.isoformat(),
            "--days",
            str(DAYS),
            "--epochs",
            "1",
            "--batch-size",
            "128",
            "--warm-start",
            "none",
            "--no-register",
            "--no-progress",
            "--model-config",
            str(cfg),
            "--out",
            str(out),
            *extra,
        ]
    )


# ---------------------------------------------------------------- full disk


def test_a_checkpoint_on_a_full_disk_is_enospc_naming_it(tmpfs: Tmpfs) -> None:
    tmpfs.fill()
    target = tmpfs.path / "checkpoints" / "epoch-1.pt"
    with pytest.raises(OSError) as exc:
        save_checkpoint(target, {"model": {"w": torch.zeros(200_000)}})
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(target)
    assert not target.exists() and not checksum_path(target).exists()


def test_a_checkpoint_write_that_fails_is_an_oserror_not_torchs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a tmpfs: the file object torch.save writes through fails like a full disk."""
    import ranking.trainer.checkpointing.checkpoint as checkpoint

    class Full(io.FileIO):
        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "open", lambda path, mode="r": Full(path, "wb"), raising=False)
    target = tmp_path / "epoch-1.pt"
    with pytest.raises(OSError) as exc:
        save_checkpoint(target, {"model": {"w": torch.zeros(10)}})
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(target)


@pytest.mark.slow
def test_training_onto_a_full_disk_is_one_line(
    tmpfs: Tmpfs, home: Path, model_config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reserve = tmpfs.path / ".reserve"
    reserve.write_bytes(b"\0" * 32768)  # room for model_config.json, not for a checkpoint
    tmpfs.fill()
    reserve.unlink()
    assert _train(home, model_config_file, tmpfs.path / "run") == 2
    line = _one_line(capsys.readouterr().err)
    assert "no space left on device (ENOSPC): " in line and str(tmpfs.path / "run") in line, line


# ---------------------------------------------------------------- corrupt inputs


def _copy_window(home: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the window (manifest paths rewritten); returns (home, first partition)."""
    mine = tmp_path / "home"
    shutil.copytree(home, mine)
    manifest_path = next((mine / "windows").glob("*/manifest.json"))
    text = manifest_path.read_text().replace(str(home), str(mine))
    manifest_path.write_text(text)
    return mine, Path(json.loads(text)["train"][0]["path"])


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "scribble"])
def test_a_corrupt_partition_at_train_time_is_one_line(
    damage: str,
    home: Path,
    model_config_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mine, part = _copy_window(home, tmp_path)
    data = bytearray(part.read_bytes())
    if damage == "truncate":
        part.write_bytes(bytes(data[: len(data) // 2]))
    else:  # footer intact, pages garbage: found only when the rows are decoded
        start, stop = 64, len(data) - 4096
        data[start:stop] = bytes((i * 37 + 11) % 256 for i in range(stop - start))
        part.write_bytes(bytes(data))
    assert _train(mine, model_config_file, tmp_path / "run") == 2
    line = _one_line(capsys.readouterr().err)
    assert str(part) in line, line


def _rechecksummed(path: Path) -> None:
    checksum_path(path).write_text(f"{sha256_file(path)}  {path.name}\n")


def test_a_corrupt_checkpoint_with_a_recomputed_checksum_is_one_line(tmp_path: Path) -> None:
    # a pickle naming a global that weights_only refuses: torch's message suggests weights_only=False
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": {}, "obj": Path("/etc")}, foreign)
    _rechecksummed(foreign)
    truncated = tmp_path / "truncated.pt"
    save_checkpoint(truncated, {"model": {"w": torch.ones(1000)}})
    truncated.write_bytes(truncated.read_bytes()[:1500])
    _rechecksummed(truncated)
    for path in (foreign, truncated):
        with pytest.raises(CheckpointError) as exc:
            load_checkpoint(path)
        message = str(exc.value)
        assert message.startswith(f"cannot load checkpoint {path}") and "\n" not in message
        assert "weights_only" not in message


@pytest.mark.slow
def test_resume_refuses_a_finished_run_without_checkpoints(
    home: Path, model_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pointed at a registry version folder (model.pt, no checkpoints/), --resume used to train
    from scratch over it and destroy the version."""
    from ranking.registry import Registry

    run = tmp_path / "run"
    assert _train(home, model_config_file, run) == 0
    reg = Registry(str(tmp_path / "registry"))
    version = reg.register(run)
    folder = tmp_path / "registry" / "versions" / version
    before = {p.name: sha256_file(p) for p in folder.iterdir()}
    capsys.readouterr()
    assert _train(home, model_config_file, folder, "--resume") == 2
    assert "no complete epoch checkpoint" in _one_line(capsys.readouterr().err)
    assert {p.name: sha256_file(p) for p in folder.iterdir()} == before
    reg.verify(version)
    # a finished run WITH its checkpoints still resumes (a retry after a crash past the last epoch)
    assert _train(home, model_config_file, run, "--resume") == 0


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_non_finite_learning_rates_are_refused(value: str, tmp_path: Path) -> None:
    raw = json.loads(default_model_config(table_rows=TABLE_ROWS).to_json())
    text = json.dumps(raw).replace('"lr": 0.05', f'"lr": {value}')
    assert value in text
    path = tmp_path / "model_config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="lr must be a finite number"):
        load_model_config(path)
