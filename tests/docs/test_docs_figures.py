"""The figures the docs quote are the committed JSON's (issue 35, deliver 5): each claim below is a
phrase of README.md or docs/*.md with its numbers read from docs/backtest/**/backtest.json or
docs/figures/*.json and formatted as the text formats them (the text's rounding, its sign and
minus characters). A re-run that rewrites a JSON without the prose, or prose edited by hand, fails
here with the phrase the docs should hold.

Whitespace is compared collapsed (a phrase may wrap across lines). Figures from logs kept out of
the repo (the real-log replays) have no JSON to read and are not listed.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
MINUS = "\N{MINUS SIGN}"


@cache
def _json(rel: str) -> Any:
    return json.loads((REPO / rel).read_text())


@cache
def _doc(rel: str) -> str:
    return " ".join((REPO / rel).read_text().split())


def pct(x: float, digits: int = 1, minus: str = MINUS) -> str:
    """A signed percentage as the docs write it: +11.9%, −2.7% (U+2212 unless told)."""
    text = f"{x * 100:+.{digits}f}%"
    return text.replace("-", minus)


def with_ci(x: float, ci: list[float], digits: int = 1, minus: str = MINUS) -> str:
    return f"{pct(x, digits, minus)} [{pct(ci[0], digits, minus)}, {pct(ci[1], digits, minus)}]"


class Backtest:
    """A committed `ranker backtest` report (ranking/backtest/report.py's JSON)."""

    def __init__(self, rel: str) -> None:
        self.data = _json(rel)

    def _cmp(self, recipe: str, candidates: bool) -> dict[str, Any]:
        key = "candidates_vs_baseline" if candidates else "vs_baseline"
        return dict(self.data[key][recipe])

    def change(self, recipe: str, metric: str = "save_hit_at_3", candidates: bool = False) -> float:
        c = self._cmp(recipe, candidates)
        return float(c["mean"][metric] / c["baseline_mean"][metric] - 1)

    def ci(self, recipe: str, metric: str = "save_hit_at_3", candidates: bool = False) -> list[float]:
        return [float(v) for v in self._cmp(recipe, candidates)["ci"][metric]]

    def lift(
        self, recipe: str, metric: str = "save_hit_at_3", *, digits: int = 1, candidates: bool = False
    ) -> str:
        return with_ci(self.change(recipe, metric, candidates), self.ci(recipe, metric, candidates), digits)

    def served(self, recipe: str, metric: str = "save_hit_at_3") -> float:
        return float(self.data["recipes"][recipe]["served_mean"][metric])

    def candidate(self, recipe: str, metric: str = "save_hit_at_3") -> float:
        return float(self.data["recipes"][recipe]["candidate_mean"][metric])


def claims() -> list[tuple[str, str]]:
    """(doc, the phrase it must hold) for every figure the docs quote from a committed JSON."""
    nvd = Backtest("docs/backtest/naive-vs-default/backtest.json")
    recipes = Backtest("docs/backtest/recipes/backtest.json")
    du = [Backtest(f"docs/backtest/delayed-update/data{i}/backtest.json") for i in (0, 1)]
    window = _json("docs/figures/benchmarks-window-2026-12-06.json")
    join, nxt = window["join"], window["next_day"]
    rss = window["rss_mib"]
    return [
        # README: the default recipe's case
        (
            "README.md",
            f"daily window: served save HIT@3 {recipes.lift('base-fj')} over a naive 1-epoch retrain",
        ),
        (
            "README.md",
            f"code and gate: {nvd.lift('default')}; the fresh candidates alone "
            f"{pct(nvd.change('default', candidates=True))}, docs/backtest.md)",
        ),
        ("README.md", f"served {pct(-recipes.change('champion-fjj'))[1:]} below naive"),
        ("README.md", f"served {du[0].lift('base-fj', digits=2)} and {du[1].lift('base-fj', digits=2)}"),
        ("README.md", f"The synthetic {pct(nvd.change('default'))} comes from a world"),
        # docs/backtest.md: `make backtest`'s report, as the section quotes it
        (
            "docs/backtest.md",
            f"| `naive` (J, 1 epoch, from scratch) | {nvd.data['recipes']['naive']['served_days']}/14 | "
            f"{nvd.served('naive'):.4f} | (baseline) |",
        ),
        (
            "docs/backtest.md",
            f"| `default` (F,J from the weekly base) | {nvd.data['recipes']['default']['served_days']}/14 | "
            f"{nvd.served('default'):.4f} | **{pct(nvd.change('default'))}** "
            f"[{pct(nvd.ci('default')[0])}, {pct(nvd.ci('default')[1])}] | {nvd.lift('default', 'auc')} | "
            f"{nvd.lift('default', 'ne')} (better) |",
        ),
        ("docs/backtest.md", f"| `naive` | {nvd.candidate('naive'):.4f} | (baseline) |"),
        (
            "docs/backtest.md",
            f"| `default` | {nvd.candidate('default'):.4f} | {nvd.lift('default', digits=2, candidates=True)} "
            f"over 14 d | {nvd.lift('default', 'auc', digits=2, candidates=True)} | "
            f"{nvd.lift('default', 'ne', digits=2, candidates=True)} |",
        ),
        (
            "docs/backtest.md",
            f"(naive {nvd.candidate('naive'):.4f}, default {nvd.candidate('default'):.4f}, "
            f"{nvd.lift('default', digits=2, candidates=True)}, the same AUC and NE)",
        ),
        (
            "docs/backtest.md",
            f"to **{nvd.lift('default')}**, still resolved, and now close to the candidates' own "
            f"{pct(nvd.change('default', candidates=True))}",
        ),
        (
            "docs/backtest.md",
            f"served `base-fj` (the same recipe as `default`) {recipes.served('base-fj'):.4f} and `naive` "
            f"{recipes.served('naive'):.4f} ({pct(recipes.change('base-fj'))})",
        ),
        # docs/study.md "Which daily recipe": the recipes backtest's table, one row per recipe
        *(
            (
                "docs/study.md",
                (f"| **{recipes.served(r):.4f}** | " if r == "base-fj" else f"| {recipes.served(r):.4f} | ")
                + (f"**{recipes.lift(r)}**" if r == "base-fj" else recipes.lift(r))
                + f" | {recipes.data['recipes'][r]['promotions']} |",
            )
            for r in recipes.data["vs_baseline"]
        ),
        (
            "docs/study.md",
            f"| {recipes.served('naive'):.4f} | — | {recipes.data['recipes']['naive']['promotions']} |",
        ),
        (
            "docs/study.md",
            f"is {pct(recipes.served('base-fj') / recipes.served('base-j') - 1)} served "
            f"({recipes.served('base-fj'):.4f} vs {recipes.served('base-j'):.4f})",
        ),
        # docs/data.md: the window benchmark's table
        (
            "docs/data.md",
            f"(child process) | {window['synth']['duration_seconds']:.1f} s |",
        ),
        (
            "docs/data.md",
            f"21 partitions, {join['rows']:,} rows | {join['feast_total_seconds']:.1f} s (median "
            f"{join['feast_day_median_seconds']:.2f} s/day, ~{join['feast_rows_per_second'] / 1000:.0f}k rows/s) |",
        ),
        (
            "docs/data.md",
            f"| {join['duckdb_total_seconds']:.1f} s (median {join['duckdb_day_median_seconds']:.2f} s/day) |",
        ),
        (
            "docs/data.md",
            f"| **Feast / direct DuckDB, per-day median** | **{join['feast_over_duckdb_ratio']:.2f}×** |",
        ),
        ("docs/data.md", f"(1 built, 20 reused) | {nxt['incremental_seconds']:.1f} s |"),
        (
            "docs/data.md",
            f"full rebuild ({nxt['full_days_built']} built) | {nxt['full_rebuild_seconds']:.1f} s |",
        ),
        (
            "docs/data.md",
            f"| **full rebuild / incremental** | **{nxt['full_over_incremental_ratio']:.1f}×** (same",
        ),
        (
            "docs/data.md",
            f"| {rss['after_feast_window']:,} MiB; {rss['after_duckdb']:,} MiB; {rss['after_next_day']:,} MiB |",
        ),
    ]


def _missing(doc_text: str, phrase: str) -> bool:
    return " ".join(phrase.split()) not in doc_text


@pytest.mark.parametrize(("doc", "phrase"), claims(), ids=lambda v: v[:60] if isinstance(v, str) else v)
def test_the_docs_quote_the_committed_figures(doc: str, phrase: str) -> None:
    assert not _missing(_doc(doc), phrase), f"{doc} should hold, from its JSON:\n  {phrase}"


def test_the_formatting_is_the_texts() -> None:
    assert pct(0.11851) == "+11.9%"
    assert pct(-0.0270, 1) == f"{MINUS}2.7%"
    assert with_ci(0.0305, [0.01526, 0.04618], 2) == "+3.05% [+1.53%, +4.62%]"
    # the check itself: one figure off fails
    assert _missing("served +11.9% [+8.8%, +15.3%]", f"served {with_ci(0.1185, [0.0875, 0.153])}")
    assert not _missing("served +11.9% [+8.7%, +15.3%] ok", f"served {with_ci(0.11851, [0.08749, 0.153])}")


def test_each_claim_names_a_number() -> None:
    assert all(re.search(r"\d", phrase) for _, phrase in claims())
