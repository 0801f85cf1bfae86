"""Study statistics: per-seed paired changes against the 1-epoch joint baseline, missing runs
counted rather than invented, and verdicts that separate signal from noise."""

from __future__ import annotations

import math

import pytest
from study_fixtures import END, result

from ranking.study.spec import Cell, StudySpec
from ranking.study.stats import relative_table, verdict


def test_relative_numbers_are_paired_per_seed_against_one_epoch_joint() -> None:
    spec = StudySpec(
        end=END, windows=(20,), epochs=(1, 2), schedules=("joint", "delayed"), seeds=2, inits=("scratch",)
    )
    results = {}
    # seed 0: baseline 0.20; seed 1: baseline 0.25 (different seeds, different baselines)
    for seed, base, joint2, delayed in [(0, 0.20, 0.19, [0.20, 0.22]), (1, 0.25, 0.2375, [0.25, 0.26])]:
        results[Cell(20, "joint", seed, "scratch").key] = result(
            Cell(20, "joint", seed, "scratch"), [base, joint2]
        )
        results[Cell(20, "delayed", seed, "scratch").key] = result(
            Cell(20, "delayed", seed, "scratch"), delayed
        )
    rows = {(r.schedule, r.epochs): r for r in relative_table(results, spec)}
    joint1 = rows[("joint", 1)].changes["save_hit_at_3"]
    assert joint1.rel_pct_by_seed == [0.0, 0.0]
    joint2 = rows[("joint", 2)].changes["save_hit_at_3"]
    assert joint2.rel_pct_by_seed == pytest.approx([-5.0, -5.0])
    assert joint2.rel_pct_mean == pytest.approx(-5.0) and joint2.rel_pct_sd == pytest.approx(0.0)
    delayed2 = rows[("delayed", 2)].changes["save_hit_at_3"]
    assert delayed2.rel_pct_by_seed == pytest.approx([10.0, 4.0])
    assert delayed2.rel_pct_mean == pytest.approx(7.0)
    assert delayed2.rel_pct_sd == pytest.approx(math.sqrt(18.0))  # sample sd of (10, 4)
    assert delayed2.mean == pytest.approx(0.24) and delayed2.n == 2
    assert rows[("delayed", 2)].letters == "F,J"


def test_missing_runs_are_counted_not_invented() -> None:
    spec = StudySpec(
        end=END, windows=(20,), epochs=(1,), schedules=("joint", "delayed"), seeds=2, inits=("scratch",)
    )
    results = {Cell(20, "joint", 0, "scratch").key: result(Cell(20, "joint", 0, "scratch"), [0.2])}
    rows = {r.schedule: r for r in relative_table(results, spec)}
    assert rows["joint"].changes["save_hit_at_3"].n == 1
    assert rows["delayed"].changes["save_hit_at_3"].n == 0
    assert math.isnan(rows["delayed"].changes["save_hit_at_3"].rel_pct_mean)


def test_verdict_separates_signal_from_noise() -> None:
    assert verdict(1.16, 2.0, 0.5, 3) == "reproduces"
    assert verdict(1.16, 0.3, 2.0, 3) == "same direction, within noise"
    assert verdict(-6.0, 3.0, 0.5, 3) == "does not reproduce"
    assert verdict(-6.0, 0.4, 2.0, 3) == "does not reproduce (within noise)"
    assert verdict(float("nan"), -1.0, 0.1, 3) == "loss"
    assert verdict(1.0, float("nan"), float("nan"), 0) == "not run"
