"""`ranker data synth` bounds (issue 25.9): a negative seed was exit 70 (numpy's ValueError), and
100e9 requests a day asked numpy for 745 GiB after part of the source had been written. Both are
one line, exit 2, before anything is written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from features.synth import MAX_ENTITIES, MAX_IMPRESSIONS_PER_DAY, SynthConfig
from ranking.cli.main import main
from ranking.core.errors import RankerError


def _synth(home: Path, *extra: str) -> int:
    argv = ["data", "synth", "--home", str(home), "--start", "2026-01-01", "--days", "3", *extra]
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's refusals exit
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--seed", "-1"), "--seed: must be in [0, 4294967295]: -1"),
        (("--requests-per-day", "100000000000"), "impressions a day exceed the generator's limit"),
        (("--users", str(MAX_ENTITIES + 1)), "users exceed the generator's limit"),
        (("--pins", "100", "--new-pins-per-day", str(MAX_ENTITIES)), "pins exceed the generator's limit"),
    ],
)
def test_out_of_bounds_synth_is_one_line_and_writes_nothing(
    flags: tuple[str, ...], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    assert _synth(home, *flags) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
    assert not home.exists()


def test_the_config_refuses_what_the_flags_refuse() -> None:
    """A config that does not come from the command line (a test, a library call) is checked too."""
    base = SynthConfig(start=dt.date(2026, 1, 1), days=3)
    base.validate()
    with pytest.raises(RankerError, match="seed must be >= 0, got -1"):
        SynthConfig(start=dt.date(2026, 1, 1), days=3, seed=-1).validate()
    per_day = MAX_IMPRESSIONS_PER_DAY // base.slate_size + 1
    with pytest.raises(RankerError, match="impressions a day exceed"):
        SynthConfig(start=dt.date(2026, 1, 1), days=3, requests_per_day=per_day).validate()
    SynthConfig(start=dt.date(2026, 1, 1), days=3, requests_per_day=per_day - 1).validate()
