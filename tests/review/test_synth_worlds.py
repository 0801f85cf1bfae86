"""The generator's world knobs (features/synth.py): left unset they change nothing; set, they
make the world whose users are mostly seen for the first time (issue 24)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pandas as pd
import pytest

from features import sources
from features.synth import SynthConfig, generate
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace

SMALL = {"users": 400, "pins": 500, "requests_per_day": 80, "slate_size": 10}
# sha256 over the source files the generator wrote for SMALL, seed 7, 3 days, computed with
# features/synth.py as of 0c40b6a (before the knobs existed): the default world must not move.
# Recomputed once for issue 30, when the snapshots gained `as_of` (their own event time, as a
# feature): checked then against 6e635af, the impressions and entities were byte-identical and
# every snapshot equal but for the added column. Issue 34 added the history views' snapshot tables
# (HISTORY_TABLES): new files, left out of the digest, which holds every file that existed before
TODAYS_SOURCE_DIGEST = "cb3f0637ab967376bc5035880ca82b606a9268089c5810548ff35875781c355c"


def _synth(home: Path, days: int = 3, seed: int = 7, **knobs: object) -> Workspace:
    ws = Workspace.resolve(home)
    generate(ws, SynthConfig(start=dt.date(2026, 3, 1), days=days, seed=seed, **{**SMALL, **knobs}))  # type: ignore[arg-type]
    return ws


HISTORY_TABLES = (sources.USER_PINS, sources.USER_CATEGORIES)


def _digest(ws: Workspace) -> str:
    h = hashlib.sha256()
    for path in sorted(ws.source.rglob("*")):
        if path.is_file() and path.relative_to(ws.source).parts[0] not in HISTORY_TABLES:
            h.update(str(path.relative_to(ws.source)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _impressions(ws: Workspace) -> pd.DataFrame:
    days = sources.list_days(ws, sources.IMPRESSIONS)
    return pd.concat(
        [sources.read_day(ws, sources.IMPRESSIONS, d).to_pandas().assign(day=d) for d in days],
        ignore_index=True,
    )


def test_default_world_is_bit_identical_to_todays(tmp_path: Path) -> None:
    assert _digest(_synth(tmp_path / "default")) == TODAYS_SOURCE_DIGEST
    # the knobs at their neutral values are the same world, byte for byte
    neutral = _synth(tmp_path / "neutral", returning_user_share=1.0, catalogue_churn=25 / 500)
    assert _digest(neutral) == TODAYS_SOURCE_DIGEST


def test_returning_user_share_sets_the_share_of_first_seen_users(tmp_path: Path) -> None:
    ws = _synth(tmp_path, days=4, returning_user_share=0.25)
    imp = _impressions(ws)
    requests = imp.drop_duplicates("request_id")
    first_day = requests.groupby("user_id")["day"].transform("min")
    # a user's first day is the only day it appears when it is first-seen (ids above the population)
    new = requests[requests["user_id"] > SMALL["users"]]
    assert len(new) == 4 * round(0.75 * SMALL["requests_per_day"])
    assert new["user_id"].is_unique  # one request each, never seen again
    assert (first_day[new.index] == new["day"]).all()
    # their features exist (the users table holds them, created the day they appear)
    users = pd.read_parquet(sources.entities_path(ws, sources.USERS))
    assert set(new["user_id"]) <= set(users["user_id"])
    # the recurring population's requests are the default world's, request for request
    default = _impressions(_synth(tmp_path / "default", days=4))
    kept = imp["user_id"] <= SMALL["users"]
    same = default.set_index(["request_id", "pin_id"]).loc[
        imp[kept].set_index(["request_id", "pin_id"]).index
    ]
    assert (same["user_id"].to_numpy() == imp[kept]["user_id"].to_numpy()).all()


def test_catalogue_churn_sets_new_pins_per_day(tmp_path: Path) -> None:
    ws = _synth(tmp_path, days=3, catalogue_churn=0.2)
    pins = pd.read_parquet(sources.entities_path(ws, sources.PINS))
    assert len(pins) == SMALL["pins"] + 2 * 100  # two later days, 20% of 500 each


@pytest.mark.parametrize("knob", ["returning_user_share", "catalogue_churn"])
@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_knobs_outside_0_1_are_refused(tmp_path: Path, knob: str, value: float) -> None:
    with pytest.raises(RankerError, match=knob):
        _synth(tmp_path, **{knob: value})


def test_cli_refuses_a_share_outside_0_1_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.cli.main import main

    argv = ["data", "synth", "--home", str(tmp_path), "--start", "2026-03-01", "--days", "2"]
    with pytest.raises(SystemExit) as exited:  # a bad command line exits as argparse does
        main([*argv, "--returning-user-share", "1.5"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--returning-user-share" in err[0]
    assert not (tmp_path / "source").exists()
    assert (
        main(
            [
                *argv,
                "--returning-user-share",
                "0.2",
                "--catalogue-churn",
                "0.1",
                "--users",
                "50",
                "--pins",
                "60",
                "--requests-per-day",
                "10",
                "--slate-size",
                "5",
                "--json",
            ]
        )
        == 0
    )
    summary = capsys.readouterr().out
    assert '"returning_user_share": 0.2' in summary and '"catalogue_churn": 0.1' in summary
