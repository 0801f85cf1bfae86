"""Every user-fixable failure is one line on stderr and exit 2 (the JSON summary says what failed);
exit 1 stays "negative decision"; a crash that is ours stays a traceback."""

from __future__ import annotations

import datetime as dt
import errno
import json
import re
import sys
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.core.errors import RankerError, RegistryError
from ranking.core.ids import RUN_ID, validate_run_id
from ranking.core.workspace import Workspace


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _exit_code(argv: list[str]) -> int:
    """main's exit status whether it returns it or exits with it (argparse-style)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("bad", ["a/b", "abc\n", "..", "x" * 200, "-rf"])
def test_a_bad_run_id_is_one_line_and_exit_2(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    assert _exit_code(["models", "list", "--home", str(home), f"--run-id={bad}"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "run id" in line or "--run-id" in line
    assert not (home / "pipeline").exists()


def test_a_run_id_with_a_trailing_newline_is_refused() -> None:
    # `$` matches before a trailing newline: the pattern must end with \Z
    assert re.match(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$", "abc\n") is not None
    assert RUN_ID.fullmatch("abc\n") is None
    with pytest.raises(RankerError, match="invalid run id"):
        validate_run_id("abc\n")
    with pytest.raises(RankerError, match="invalid run id"):
        Workspace(Path("/tmp/ws")).step_summary_path("abc\n", "train")


def test_home_pointing_at_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "a-file"
    home.write_text("not a folder")
    assert main(["models", "list", "--home", str(home), "--json"]) == 2
    captured = capsys.readouterr()
    assert "is not a folder" in _one_line(captured.err)
    summary = json.loads(captured.out)
    assert summary["exit_code"] == 2 and "is not a folder" in summary["error"]
    assert summary["step"] == "models list"


@pytest.mark.parametrize(
    "argv",
    [
        ["features", "window", "--end", "2026-01-07", "--days", "800000"],
        ["features", "window", "--end", "0001-01-01"],
        ["features", "window", "--end", "9999-12-31", "--days", "1"],
        ["data", "synth", "--start", "2999-12-01", "--days", "100000"],
        ["data", "synth", "--start", "2026-01-01", "--days", "5000000"],  # past year 9999
        ["data", "synth", "--start", "2026-01-01", "--days", "1000000000"],  # past timedelta's range
        ["train", "--end", "0001-01-01"],
    ],
)
def test_dates_out_of_range_are_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code([*argv, "--home", str(tmp_path / "home")]) == 2
    _one_line(capsys.readouterr().err)


def test_the_window_builder_refuses_windows_off_the_calendar(tmp_path: Path) -> None:
    from features.window import build_window

    ws = Workspace.resolve(tmp_path / "home")
    with pytest.raises(RankerError, match=r"window days must be in 1\.\.3660"):
        build_window(ws, dt.date(2026, 1, 7), 800_000)
    with pytest.raises(RankerError, match="outside the calendar"):
        build_window(ws, dt.date(1, 1, 5), 20)


def test_s3_without_s3fs_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    fsspec_registry = importlib.import_module("fsspec.registry")  # the module, not fsspec.registry
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if not installed
    monkeypatch.delitem(fsspec_registry._registry, "s3", raising=False)
    home = str(tmp_path / "home")
    assert main(["models", "list", "--home", home, "--registry", "s3://bucket/ranker"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "s3:// needs s3fs, which is not installed" in line


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("nosuchproto://bucket/x", "unknown fsspec protocol 'nosuchproto'"),
        # ftp's "xb" is fsspec's exists-then-write: refused by name, before any connection
        ("ftp://host.invalid/registry", r"ftp:// backend \(FTPFileSystem\) has no conditional create"),
        ("zip://x.zip", r"zip:// backend \(ZipFileSystem\) has no conditional create"),
    ],
)
def test_registry_backends_without_a_conditional_create_are_refused(
    url: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.registry import Registry

    with pytest.raises(RegistryError, match=message):
        Registry(url)
    assert main(["models", "list", "--home", str(tmp_path / "home"), "--registry", url]) == 2
    assert re.search(message, _one_line(capsys.readouterr().err))


def test_environment_oserrors_are_one_line_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ranking.cli.models as models

    def full_disk(args: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device", "/data/registry/versions/v0001/model.pt")

    monkeypatch.setattr(models, "handle_models_list", full_disk)
    assert main(["models", "list", "--home", str(tmp_path), "--json"]) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert "no space left on device (ENOSPC): /data/registry/versions/v0001/model.pt" in line
    assert json.loads(captured.out)["error_type"] == "RankerError"


@pytest.mark.parametrize(
    "crash",
    [ValueError("a bug of ours"), OSError(errno.EIO, "Input/output error"), KeyError("x")],
)
def test_a_crash_that_is_ours_stays_a_traceback(
    crash: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ranking.cli.models as models

    def boom(args: object) -> object:
        raise crash

    monkeypatch.setattr(models, "handle_models_list", boom)
    with pytest.raises(type(crash)):
        main(["models", "list", "--home", str(tmp_path)])


def test_the_ranker_command_exits_with_the_crash_code_not_the_decision_code(tmp_path: Path) -> None:
    """Through the console script's entry point in a fresh process: a crash of ours prints its
    traceback and exits EXIT_CRASH (70), never 1 ("gate rejected") or 2 (user error)."""
    import subprocess

    from ranking.cli.main import EXIT_CRASH

    script = (
        "import sys, ranking.cli.models as m\n"
        "def boom(args): raise ValueError('a bug of ours')\n"
        "m.handle_models_list = boom\n"
        "from ranking.cli.main import entry\n"
        "sys.exit(entry())\n"
    )
    argv = [sys.executable, "-c", script, "models", "list", "--home", str(tmp_path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_CRASH not in (0, 1, 2), proc.stderr
    assert "Traceback" in proc.stderr and "ValueError: a bug of ours" in proc.stderr
    # a user error through the same entry point (python -m ranking.cli) is still one line, exit 2
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("x")
    argv = [sys.executable, "-m", "ranking.cli", "models", "list", "--home", str(not_a_folder)]
    user = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert user.returncode == 2
    assert str(not_a_folder) in _one_line(user.stderr)
