"""A tiny end-to-end workspace for other components' tests: synth -> apply -> materialize ->
window through the real code path (Feast included), small enough to take seconds after the
~12 s ``import feast``.

    from features.testing import make_tiny_workspace
    info = make_tiny_workspace(tmp_path / "home", start=date(2026, 1, 1), days=6)
    info["manifest"]   # path of the window manifest (end = the last day, window = the days before)
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from features import feast_repo, window
from features.synth import SynthConfig, SynthSummary, generate
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from ranking.core.summaries import MaterializeSummary

TINY = {"users": 300, "pins": 400, "slate_size": 10}


class TinyWorkspace(TypedDict):
    """What :func:`make_tiny_workspace` made (the window's keys only when it built one)."""

    home: str
    start: str  # YYYY-MM-DD
    end: str  # the last day: the window's eval day
    days: int
    window_days: int
    synth: SynthSummary
    apply: NotRequired[feast_repo.ApplySummary]
    materialize: NotRequired[MaterializeSummary]
    # the manifest as build_window returns it: its JSON, which the window's tests index
    window: NotRequired[dict[str, Any]]
    manifest: NotRequired[str]  # its path


def make_tiny_workspace(
    home: str | os.PathLike[str],
    start: dt.date = dt.date(2026, 1, 1),
    days: int = 6,
    requests_per_day: int = 60,
    seed: int = 0,
    window_days: int | None = None,
    build: bool = True,
    offline_store: str | None = None,
    **synth_knobs: Any,
) -> TinyWorkspace:
    """Generate ``days`` days of data from ``start`` and (with ``build``) apply Feast, materialize
    and build the window ending on the last day (``window_days`` default: all days before it),
    on the Feast offline store ``offline_store`` (duckdb or spark; default: $RANKER_OFFLINE_STORE,
    else duckdb).

    Returns a :class:`TinyWorkspace`."""
    if days < 2:
        raise ValueError("a tiny workspace needs at least 2 days (one training day and the eval day)")
    ws = Workspace.resolve(home)
    knobs = {**TINY, **synth_knobs}
    synth = generate(
        ws, SynthConfig(start=start, days=days, requests_per_day=requests_per_day, seed=seed, **knobs)
    )
    end = start + dt.timedelta(days=days - 1)
    wdays = window_days if window_days is not None else days - 1
    info = TinyWorkspace(
        home=str(ws.root),
        start=start.isoformat(),
        end=end.isoformat(),
        days=days,
        window_days=wdays,
        synth=synth,
    )
    if build:
        settings = feast_repo.store_settings(offline_store=offline_store)
        info["apply"] = feast_repo.apply(ws, settings)
        info["materialize"] = feast_repo.materialize(ws, end, settings)
        info["window"] = window.build_window(ws, end, wdays, settings=settings)
        info["manifest"] = str(ws.window_manifest(end, wdays))
    return info
