"""The gate with power and an anchor: CIs on every comparison (the same resamples), the
non-inferiority rule, and an anchor that stops a chain of small daily losses."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.gate.bootstrap import paired_bootstrap
from ranking.gate.checks import GateConfig, TrainingWindow, run_gate
from ranking.gate.run import recent_champions
from ranking.registry.records import AliasEvent

REQUESTS = 5_000
SLATE = 10
FIRST_HITS = 2_500  # model 0 ranks the saved pin first in half of the requests
DAILY_LOSS = 0.008


def _day(d: int) -> tuple[pd.DataFrame, np.ndarray]:
    """One saved pin per request (position 0 of each slate) and a seeded order of requests:
    model k hits the first round(FIRST_HITS * 0.992**k) requests of that order (nested, so each
    model is exactly 0.8% worse than the one before on every day)."""
    frame = pd.DataFrame(
        {
            "request_id": np.repeat(np.arange(REQUESTS), SLATE),
            "pin_id": np.tile(np.arange(SLATE), REQUESTS),
            "saved": np.tile(np.r_[1, np.zeros(SLATE - 1, dtype=int)], REQUESTS),
        }
    )
    return frame, np.random.default_rng(d).permutation(REQUESTS)


def _model(frame: pd.DataFrame, order: np.ndarray, k: int) -> pd.DataFrame:
    hits = round(FIRST_HITS * (1 - DAILY_LOSS) ** k)
    hit_request = np.zeros(REQUESTS, bool)
    hit_request[order[:hits]] = True
    negatives = np.tile(np.linspace(0.05, 0.09, SLATE - 1), REQUESTS).reshape(REQUESTS, SLATE - 1)
    saved = np.where(hit_request, 0.5, 0.01)[:, None]
    return with_scores(frame, np.hstack([saved, negatives]).ravel())


def _replay(config: GateConfig, days: int = 10) -> list[str]:
    """Each day the candidate is 0.8% worse than the champion; a passed candidate becomes the
    champion. Returns the decisions."""
    champions = [0]  # the registry's champion history, model indices
    decisions = []
    for d in range(1, days + 1):
        frame, order = _day(d)
        candidate = champions[-1] + 1
        recent = champions[-config.anchor_champions :] if config.anchor_champions else []
        report = run_gate(
            _model(frame, order, candidate),
            _model(frame, order, champions[-1]),
            config,
            eval_date=dt.date(2026, 2, d),
            candidate_window=TrainingWindow(dt.date(2026, 1, d), dt.date(2026, 2, d)),
            champion_window=TrainingWindow(dt.date(2025, 12, 31), dt.date(2026, 1, 31)),
            anchors={f"v{k:04d}": _model(frame, order, k) for k in recent},
        )
        assert report.relative_change == pytest.approx(-DAILY_LOSS, abs=5e-4)
        decisions.append(report.decision)
        if report.passed:
            champions.append(candidate)
    return decisions


LOOSE = {"max_auc_drop": 1.0, "max_ne_rise": 1.0, "calibration_high": 5.0, "bootstrap_samples": 100}


def test_small_daily_losses_pass_the_old_rule_every_day() -> None:
    old = GateConfig(rule="point", tolerance=0.01, anchor_champions=0, **LOOSE)  # type: ignore[arg-type]
    assert _replay(old) == ["pass"] * 10  # 10 promotions: 7.7% lost in total


def test_the_anchor_stops_them_once_they_add_up() -> None:
    anchored = GateConfig(
        rule="point",
        tolerance=0.01,
        anchor_champions=10,
        anchor_tolerance=0.02,
        **LOOSE,  # type: ignore[arg-type]
    )
    decisions = _replay(anchored)
    # 1 - 0.992**2 = 1.6% passes, 1 - 0.992**3 = 2.4% is stopped; and stays stopped
    assert decisions == ["pass", "pass"] + ["reject"] * 8


def test_an_anchor_of_only_the_champion_does_not() -> None:
    moving = GateConfig(rule="point", tolerance=0.01, anchor_champions=1, anchor_tolerance=0.02, **LOOSE)  # type: ignore[arg-type]
    assert _replay(moving) == ["pass"] * 10


def test_the_anchor_check_is_reported_with_its_version_and_interval() -> None:
    frame, order = _day(1)
    report = run_gate(
        _model(frame, order, 3),
        _model(frame, order, 2),
        GateConfig(anchor_tolerance=0.02, **LOOSE),  # type: ignore[arg-type]
        anchors={
            "v0001": _model(frame, order, 1),
            "v0000": _model(frame, order, 0),
            "v0002": _model(frame, order, 2),
        },
    )
    anchor = next(c for c in report.checks if c.name == "anchor")
    assert report.anchor is not None and report.anchor["version"] == "v0000"  # the best on this day
    assert report.anchor["considered"] == ["v0000", "v0001", "v0002"]
    assert anchor.threshold == -0.02 and not anchor.passed
    assert (
        anchor.ci is not None
        and anchor.value == anchor.ci[0] < report.anchor["relative_change"] < anchor.ci[1]
    )
    assert "v0000" in anchor.detail


@pytest.fixture(scope="module")
def day() -> tuple[pd.DataFrame, np.ndarray]:
    return make_eval_day(requests=600, slate=10, seed=7)


def test_guardrails_are_judged_on_their_ci_upper_bounds(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    cand, champ = with_scores(frame, noisy(p, 0.8, 17)), with_scores(frame, noisy(p, 0.8, 117))
    point = run_gate(cand, champ, GateConfig(rule="point", tolerance=0.9, allow_unfair=True))
    drop = next(c for c in point.checks if c.name == "auc_drop")
    rise = next(c for c in point.checks if c.name == "ne_rise")
    assert drop.value is not None and rise.value is not None and drop.ci and rise.ci
    # thresholds just above the point estimates: the point rule passes, the CIs do not fit under them
    config = {
        "tolerance": 0.9,
        "max_auc_drop": max(drop.value, 0) + 1e-3,
        "max_ne_rise": max(rise.value, 0) + 1e-3,
        "allow_unfair": True,
    }
    assert run_gate(cand, champ, GateConfig(rule="point", **config)).failed_checks == []
    ci = run_gate(cand, champ, GateConfig(rule="ci", **config))
    assert set(ci.failed_checks) == {"auc_drop", "ne_rise"}
    assert next(c for c in ci.checks if c.name == "auc_drop").value == drop.ci[1]


def test_paired_bootstrap_is_seeded_paired_and_shared(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    codes = frame["request_id"].factorize()[0]
    y = frame["saved"].to_numpy(float)
    good, bad = noisy(p, 0.3, 1), noisy(p, 1.5, 2)
    same = paired_bootstrap(codes, y, good, [good], samples=200, level=0.9, seed=1)[0]
    assert same.hit_change == [0.0, 0.0] and same.auc_drop == [0.0, 0.0] and same.ne_rise == [0.0, 0.0]
    a = paired_bootstrap(codes, y, good, [bad, good], samples=200, level=0.9, seed=1)
    b = paired_bootstrap(codes, y, good, [bad], samples=200, level=0.9, seed=1)
    assert a[0] == b[0]  # the same draws whatever else is judged on them
    assert a[0].hit_change and a[0].hit_change[0] > 0  # clearly better: the whole interval above 0
    assert a[0].auc_drop and a[0].auc_drop[1] < 0 and a[0].ne_rise and a[0].ne_rise[1] < 0
    other = paired_bootstrap(codes, y, good, [bad], samples=200, level=0.9, seed=2)[0]
    assert other != a[0]


def _event(seq: int, to: str, frm: str | None, action: str = "promote") -> AliasEvent:
    return AliasEvent(seq, "champion", frm, to, action, "2026-01-01T00:00:00Z", None, "", "test")


def test_recent_champions_newest_first_without_rolled_back_versions() -> None:
    history = [
        _event(1, "v0001", None),
        _event(2, "v0002", "v0001"),
        _event(3, "v0004", "v0002"),
        _event(4, "v0002", "v0004", action="rollback"),
        _event(5, "v0005", "v0002"),
    ]
    assert recent_champions(history, 10) == ["v0005", "v0002", "v0001"]
    assert recent_champions(history, 2) == ["v0005", "v0002"]
