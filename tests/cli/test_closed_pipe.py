"""`ranker ... | head` exits quietly: stdout's reader going away is the reader's choice, not a crash
(issue 35: `ranker metrics show | head -20` and `ranker config show | head -3` exited 70 with a
BrokenPipeError traceback in 3 of 5 tries)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ranking.core.errors import EXIT_CRASH

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def ranker(*words: str) -> list[str]:
    return [sys.executable, "-m", "ranking.cli", *words]


def run_into_closed_pipe(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader is already gone: every write to it is a broken pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            command, stdout=write_end, stderr=subprocess.PIPE, text=True, env=ENV, timeout=120
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    ("words", "code"),
    [
        (["config", "show"], 0),  # the summary's text
        (["config", "show", "--json"], 0),  # the summary's JSON
        (["--help"], 0),  # argparse's own print
        (["config", "show", "--json", "--no-such-flag"], 2),  # a failure's JSON: its code stays
    ],
    ids=["text", "json", "help", "failure-json"],
)
def test_a_reader_gone_before_the_first_line(tmp_path: Path, words: list[str], code: int) -> None:
    proc = run_into_closed_pipe(ranker(*words, *(["--home", str(tmp_path)] if words[0] != "--help" else [])))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "BrokenPipeError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == code, proc.stderr[-2000:]


def test_head_reads_one_line_and_leaves(tmp_path: Path) -> None:
    """As `| head -1` does: the reader takes the first line and closes, while the command writes."""
    codes = []
    for _ in range(5):
        proc = subprocess.Popen(
            ranker("config", "show", "--home", str(tmp_path)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
        )
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        codes.append(proc.wait(timeout=120))
        assert first.strip(), stderr[-2000:]
        assert "Traceback" not in stderr, stderr[-2000:]
    assert codes == [0] * 5


def test_a_broken_pipe_of_ours_is_still_a_crash() -> None:
    """Only stdout's reader leaving is quiet: a broken pipe elsewhere (a socket, a child's pipe)
    with stdout still read is a traceback and EXIT_CRASH, as any other crash."""
    script = (
        "import sys\n"
        "import ranking.cli.main as m\n"
        "def main(argv=None):\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "m.main = main\n"
        "sys.exit(m.entry())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == EXIT_CRASH, proc.stderr[-2000:]
    assert "BrokenPipeError" in proc.stderr
