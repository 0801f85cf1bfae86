"""Bad numbers of issue 32 are one line and exit 2 before anything runs: threads the machine cannot
give, negative or 64-bit seeds, infinities, --params nested past the parser, a garbage checkpoint
sidecar or format, and an error line of bounded length whatever the input's size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.config.loader import ConfigFileError, load, parse_params
from ranking.core.limits import MAX_SEED, MAX_THREADS, MAX_THREADS_WHY


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (
            ["train", "--threads", "100000"],
            f"--threads: must be in [1, {MAX_THREADS}]: 100000 ({MAX_THREADS_WHY})",
        ),
        (["train", "--seed", str(2**64)], f"--seed: must be in [0, {MAX_SEED}]"),
        (["pretrain", "--seed", "-1"], f"--seed: must be in [0, {MAX_SEED}]: -1"),
        (["backtest", "--seed", "-1", "--start", "2026-01-01", "--days", "1"], "--seed: must be in [0,"),
        (["data", "synth", "--id-effect-scale", "inf"], "--id-effect-scale: must be >= 0: inf"),
        (["data", "synth", "--seed", str(2**64)], "--seed: must be in [0,"),
    ],
)
def test_bad_numbers_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], match: str
) -> None:
    assert _exit_code([*argv, "--home", str(tmp_path / "home")]) == 2
    assert match in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "home").exists()  # nothing started


@pytest.mark.parametrize("key", ["recipe.seed", "pretrain.seed", "gate.seed"])
def test_a_seed_past_64_bits_in_the_config_is_one_config_error(tmp_path: Path, key: str) -> None:
    section, name = key.split(".")
    (tmp_path / "ranker.toml").write_text(f"[{section}]\n{name} = {2**64}\n")
    with pytest.raises(ConfigFileError, match=rf"{key}: must be <= {MAX_SEED}"):
        load(tmp_path)


def test_params_nested_past_the_parser_are_one_error() -> None:
    with pytest.raises(ConfigFileError, match="nested too deeply"):
        parse_params("[" * 60_000 + "]" * 60_000)


def test_thousands_of_bad_keys_make_one_short_line(tmp_path: Path) -> None:
    params = {f"recipe.unknown_{i}": 1 for i in range(5000)}
    with pytest.raises(ConfigFileError) as found:
        load(tmp_path, overrides=parse_params(json.dumps(params)), override_source="params")
    message = str(found.value)
    assert len(message) < 2000 and "and 4995 more" in message and "\n" not in message


def test_a_garbage_sidecar_line_or_format_is_a_checkpoint_error(tmp_path: Path) -> None:
    import torch

    from ranking.trainer.checkpointing.checkpoint import (
        CheckpointError,
        load_checkpoint,
        save_checkpoint,
        verify_epoch,
    )

    folder = tmp_path / "epoch-1"
    folder.mkdir()
    (folder / "part.bin").write_bytes(b"x")
    (tmp_path / "epoch-1.sha256").write_text("not-a-digest\n")
    with pytest.raises(CheckpointError, match="not '<sha256> <file>'"):
        verify_epoch(folder)
    path = tmp_path / "model.pt"
    save_checkpoint(path, {"model": {"w": torch.zeros(1)}, "format": "9"})
    with pytest.raises(CheckpointError, match="format '9' is not a checkpoint format"):
        load_checkpoint(path)


def test_a_blank_actor_is_refused_and_an_unset_one_is_the_os_user(monkeypatch: pytest.MonkeyPatch) -> None:
    from ranking.core.errors import RegistryError
    from ranking.registry.records import current_actor

    monkeypatch.setenv("RANKER_ACTOR", "   ")
    with pytest.raises(RegistryError, match=r"\$RANKER_ACTOR is blank"):
        current_actor()
    monkeypatch.setenv("RANKER_ACTOR", "alice")
    assert current_actor() == "alice"
    monkeypatch.delenv("RANKER_ACTOR")
    assert current_actor().strip()


def test_a_registry_whose_folder_is_missing_is_one_line_not_an_empty_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKER_HOME", str(tmp_path / "nonexistent" / "x"))
    assert _exit_code(["models", "list"]) == 2
    assert "does not exist, nor its folder" in _one_line(capsys.readouterr().err)
    # a workspace whose registry is not created yet (before its first registration) is empty
    (tmp_path / "ws").mkdir()
    assert _exit_code(["models", "list", "--home", str(tmp_path / "ws")]) == 0
    assert "champion: (none)" in capsys.readouterr().out


def test_a_compact_record_larger_than_its_table_is_refused_before_allocating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from ranking.trainer.checkpointing import compact
    from ranking.trainer.checkpointing.errors import CheckpointError

    def allocated(*args: object, **kwargs: object) -> object:
        raise AssertionError("the loader allocated before it checked the shape")

    monkeypatch.setattr(compact, "_reference_tensor", allocated)
    key = "sparse_arch.embedding_bags.t_pin_id.weight"
    record = {"shape": [2**36, 16], "rows": torch.zeros(1, dtype=torch.long), "values": torch.zeros(1, 16)}
    payload = {
        "model_config": {"tables": [{"name": "t_pin_id", "num_embeddings": 500, "embedding_dim": 16}]},
        "sparse": {"model": {key: {**record, "init": {"kind": "table", "table": "t_pin_id", "seed": 0}}}},
    }
    with pytest.raises(
        CheckpointError, match=r"shape \[68719476736, 16\] does not fit .* \(t_pin_id: 500 x 16\)"
    ):
        compact.expand(payload)


def test_yaml_keys_given_twice_and_usage_errors_name_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ranker.yaml").write_text("gate:\n  tolerance: 0.1\n  tolerance: 0.9\n")
    with pytest.raises(ConfigFileError, match="key 'tolerance' given twice"):
        load(tmp_path)
    assert _exit_code(["config", "show", "--home", str(tmp_path)]) == 2
    assert _one_line(capsys.readouterr().err).startswith("ranker config show: error: ")
    assert _exit_code(["data", "synth", "--seed", "-1", "--home", str(tmp_path / "h")]) == 2
    assert _one_line(capsys.readouterr().err).startswith("ranker data synth: error: ")
