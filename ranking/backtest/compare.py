"""A backtest's replayed records compared: each recipe against the baseline (its served models and
its candidates), against the non-learned heuristic, slice by slice, and each pair of recipes that
differs only in the delayed update; ``report_of`` puts them in the report ``ranker backtest``
writes and the review weighs (paired bootstrap statistics: ``ranking.backtest.stats``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from ranking.backtest.day import DayRecord, eval_partition
from ranking.backtest.engine import Backtest
from ranking.backtest.report import BacktestReport, DelayedUpdatePair
from ranking.backtest.spec import BacktestError
from ranking.backtest.stats import Comparison, SliceComparison
from ranking.core.atomic import atomic_path


def compare_to_baseline(
    bt: Backtest, records: Mapping[str, list[DayRecord]], who: str = "served"
) -> dict[str, Comparison | None]:
    """Each non-baseline recipe's paired comparison with the baseline over the days both had a
    model: ``who = "served"`` (the models production served) or ``"candidate"`` (each day's freshly
    trained model, before the gate: the recipe's training itself, without the gate's choices)."""
    base = bt.spec.baseline
    return {name: compare_recipes(bt, records, name, base, who) for name in records if name != base}


def compare_recipes(
    bt: Backtest, records: Mapping[str, list[DayRecord]], name: str, reference: str, who: str = "served"
) -> Comparison | None:
    """Recipe ``name``'s ``who`` models paired with ``reference``'s over the days both had one
    (``ranking.backtest.stats.compare``; None without a common day)."""
    import pandas as pd

    from ranking.backtest.stats import compare, paired_day

    folders = {run.recipe.name: run.folder for run in bt.runs}

    def scores(recipe: str, record: DayRecord) -> Any:
        rel = record.scores_of(who)
        return pd.read_parquet(folders[recipe] / rel) if rel else None

    base_days = {r.day: r for r in records[reference]}
    pairs = []
    for r in records[name]:
        b = base_days.get(r.day)
        if b is None:
            continue
        b_scores, o_scores = scores(reference, b), scores(name, r)
        if b_scores is None or o_scores is None:
            continue
        pairs.append(paired_day(r.day, b_scores, o_scores))
    return compare(pairs, samples=bt.spec.bootstrap_samples, level=bt.spec.ci_level, seed=bt.spec.seed)


def delayed_update_pairs(bt: Backtest) -> list[tuple[str, str]]:
    """``(with, without)``: the backtest's recipes whose effective configs differ only in a frozen
    first epoch: the same joint epochs after it (F,J vs J) or that epoch joint instead (F,J vs
    J,J). Their comparison is the delayed update's own share of a recipe's lift."""
    from ranking.trainer.schedule import FROZEN, JOINT, resolve_schedule

    def phases(run: Any) -> tuple[str, ...]:
        recipe = run.effective.config.recipe
        return resolve_schedule(recipe.schedule, recipe.epoch_count)

    def rest(run: Any) -> str:
        dumped = run.effective.config.model_dump(mode="json")
        dumped.pop("metrics", None)
        dumped["recipe"] = {k: v for k, v in dumped["recipe"].items() if k not in ("schedule", "epochs")}
        return json.dumps(dumped, sort_keys=True)

    out = []
    for a in bt.runs:
        pa = phases(a)
        if pa[0] != FROZEN:
            continue
        for b in bt.runs:
            if b is not a and phases(b) in (pa[1:], (JOINT, *pa[1:])) and rest(a) == rest(b):
                out.append((a.recipe.name, b.recipe.name))
    return out


def _eval_columns(bt: Backtest, day: dt.date, columns: list[str]) -> Any:
    """``columns`` of ``day``'s eval partition (the first recipe's window length); None when the
    day's window was not built or lacks one of them."""
    import pyarrow.parquet as pq

    parquet = eval_partition(bt.ws.root, day, bt.runs[0].effective.config.window.days)
    if parquet is None:
        return None
    if not set(columns) <= set(pq.read_schema(parquet).names):
        return None
    return pq.read_table(parquet, columns=columns).to_pandas()


def heuristic_day_scores(bt: Backtest, day: dt.date) -> Any:
    """The non-learned heuristic's scores on ``day``'s eval partition (the backtested workspace's
    ``[heuristic]``, the first recipe's config), kept under ``<backtest>/heuristic/``; None when
    the day's window was not built or lacks the heuristic's columns."""
    import pandas as pd

    from ranking.evaluation.heuristic import HEURISTIC_COLUMNS, heuristic_scores
    from ranking.evaluation.scores import write_scores

    path = bt.folder / "heuristic" / f"{day.isoformat()}.parquet"
    if path.is_file():
        return pd.read_parquet(path)
    config = bt.runs[0].effective.config
    examples = _eval_columns(bt, day, ["request_id", "pin_id", "saved", *HEURISTIC_COLUMNS])
    if examples is None:
        return None
    scores = heuristic_scores(examples, config.heuristic.heuristic_config())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_scores(path, scores)
    return scores


def compare_to_heuristic(
    bt: Backtest, records: Mapping[str, list[DayRecord]], who: str = "served"
) -> dict[str, Comparison | None]:
    """Each recipe's paired comparison with the non-learned heuristic over the days it had a
    ``who`` model (served | candidate), as :func:`compare_to_baseline` pairs two recipes."""
    import pandas as pd

    from ranking.backtest.stats import compare, paired_day

    folders = {run.recipe.name: run.folder for run in bt.runs}
    out: dict[str, Comparison | None] = {}
    for name, days in records.items():
        pairs = []
        for r in days:
            rel = r.scores_of(who)
            if not rel:
                continue
            heuristic = heuristic_day_scores(bt, dt.date.fromisoformat(r.day))
            if heuristic is not None:
                pairs.append(paired_day(r.day, heuristic, pd.read_parquet(folders[name] / rel)))
        out[name] = compare(
            pairs, samples=bt.spec.bootstrap_samples, level=bt.spec.ci_level, seed=bt.spec.seed
        )
    return out


def slice_day_frame(bt: Backtest, day: dt.date) -> Any:
    """``day``'s slices (``ranking.evaluation.slices.slice_frame`` with the first recipe's
    ``[slices]``) on its eval partition, kept under ``<backtest>/slices/``; None when the day's
    window was not built or lacks the slices' columns."""
    import pandas as pd

    from ranking.evaluation.slices import slice_frame

    path = bt.folder / "slices" / f"{day.isoformat()}.parquet"
    if path.is_file():
        return pd.read_parquet(path)
    slices = bt.runs[0].effective.config.slices.slice_config()
    examples = _eval_columns(bt, day, ["request_id", "pin_id", *slices.columns_needed])
    if examples is None:
        return None
    frame = slice_frame(examples, slices)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return frame


def compare_slices_to_baseline(
    bt: Backtest, records: Mapping[str, list[DayRecord]], who: str = "served"
) -> dict[str, list[SliceComparison]]:
    """Each non-baseline recipe's ``who`` models against the baseline's in every slice of the
    eval days both had one (``ranking.backtest.stats.compare_slices``)."""
    import numpy as np
    import pandas as pd

    from ranking.backtest.stats import SliceDay, compare_slices

    folders = {run.recipe.name: run.folder for run in bt.runs}
    base = bt.spec.baseline
    keys = ["request_id", "pin_id"]

    def scores(name: str, record: DayRecord | None) -> Any:
        rel = record.scores_of(who) if record else None
        return pd.read_parquet(folders[name] / rel).sort_values(keys, ignore_index=True) if rel else None

    base_days = {r.day: r for r in records[base]}
    out: dict[str, list[SliceComparison]] = {}
    for name, days in records.items():
        if name == base:
            continue
        cut = []
        for r in days:
            b, o = scores(base, base_days.get(r.day)), scores(name, r)
            slices = (
                slice_day_frame(bt, dt.date.fromisoformat(r.day)) if b is not None and o is not None else None
            )
            if slices is None:
                continue
            aligned = b[keys].merge(slices, on=keys, how="left", validate="one_to_one")
            names = [c for c in slices.columns if c not in keys]
            if aligned[names].isna().to_numpy().any() or not b[keys].equals(o[keys]):
                raise BacktestError(f"{r.day}: the slices or the models do not cover the same impressions")
            masks = {n: aligned[n].to_numpy(dtype=bool) for n in names}
            models = (b["score"].to_numpy(dtype=np.float64), o["score"].to_numpy(dtype=np.float64))
            cut.append(SliceDay.of(r.day, b["request_id"], b["saved"], models, masks))
        out[name] = compare_slices(
            cut, samples=bt.spec.bootstrap_samples, level=bt.spec.ci_level, seed=bt.spec.seed
        )
    return out


def report_of(
    bt: Backtest,
    records: Mapping[str, list[DayRecord]],
    wall_seconds: float,
    *,
    candidate_only: bool = False,
) -> BacktestReport:
    """The backtest report of replayed ``records``: every recipe against the baseline (its served
    models, unless ``candidate_only``, and its candidates), against the non-learned heuristic,
    slice by slice, and each pair that differs only in the delayed update (``delayed_update_pairs``)."""
    from ranking.backtest.report import build_report

    whose = ("candidate",) if candidate_only else ("served", "candidate")
    delayed = [
        DelayedUpdatePair(
            with_frozen,
            without,
            {who: compare_recipes(bt, records, with_frozen, without, who) for who in whose},
        )
        for with_frozen, without in delayed_update_pairs(bt)
    ]
    return build_report(
        bt.spec,
        records,
        {} if candidate_only else compare_to_baseline(bt, records),
        wall_seconds,
        compare_to_baseline(bt, records, who="candidate"),
        {who: compare_to_heuristic(bt, records, who) for who in whose},
        {who: compare_slices_to_baseline(bt, records, who) for who in whose},
        delayed,
    )
