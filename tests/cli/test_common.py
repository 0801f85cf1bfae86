"""The shared argparse number types: one definition, clear errors, NaN refused."""

from __future__ import annotations

import argparse

import pytest

from ranking.cli.common import float_in, fraction, fraction_below_one, non_negative


def test_ranges_accept_their_bounds_and_refuse_what_is_outside() -> None:
    assert non_negative("0") == 0.0 and non_negative("2.5") == 2.5
    assert fraction("1") == 1.0 and fraction_below_one("0.99") == 0.99
    assert float_in(-1.0, 1.0)("-1") == -1.0
    for parse, value, message in [
        (non_negative, "-0.1", "must be >= 0"),
        (fraction, "1.01", r"must be in \[0, 1\]"),
        (fraction_below_one, "1", r"must be in \[0, 1\)"),
        (fraction, "nan", "must be in"),
        (non_negative, "abc", "not a number"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse(value)


def test_progress_without_a_terminal_is_one_json_event_per_item(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from ranking.cli.common import progress_printer

    show = progress_printer("backtest", unit="day", label="day")
    show("2026-10-21", 1, 4, 10.0)
    show("2026-10-22", 2, 4, 30.0)
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(e["event"], e["day"], e["done"], e["eta_s"]) for e in events] == [
        ("backtest_progress", "2026-10-21", 1, 30),
        ("backtest_progress", "2026-10-22", 2, 30),
    ]
