"""``--help`` works for every command and subcommand: argparse formats each help string with ``%``,
so one unescaped percent sign in any option's help made ``ranker gate --help`` a crash (issue 25)."""

from __future__ import annotations

import argparse

import pytest

from ranking.cli.main import build_parser, main


def command_lines(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command line that names a (sub)command, parents before their children."""
    lines = [words]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                lines += command_lines(child, (*words, name))
    return lines


COMMANDS = command_lines(build_parser())


def test_the_walk_finds_nested_subcommands() -> None:
    assert ("gate",) in COMMANDS and ("run",) in COMMANDS
    assert ("data", "synth") in COMMANDS and ("models", "list") in COMMANDS
    assert len(COMMANDS) > 20


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "ranker")
def test_help_exits_0_and_prints_the_usage(
    words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*words, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ranker")
    assert " ".join(("ranker", *words)) in out.splitlines()[0]
