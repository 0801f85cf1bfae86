"""The data validation's pure parts (issue 30): statistics of a day, the kept schema, and each
anomaly kind found where it was planted and nowhere else, on days made in memory (no Feast)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from validation_days import COLUMNS, days, make_day

from features.validation import data_schema, reference
from features.validation import statistics as st
from features.validation.anomalies import (
    KINDS,
    Acceptance,
    DayUnderTest,
    ValidationConfig,
    js_divergence,
    linf_distance,
    window_anomalies,
    with_policies,
)
from ranking.backtest import inject
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.summaries import Anomaly

FIRST = dt.date(2026, 3, 1)
HISTORY = 14  # days before the window
WINDOW = 10


def judge(
    tables: Sequence[tuple[dt.date, pa.Table]],
    window: int = WINDOW,
    config: ValidationConfig | None = None,
    accepted: dict[str, Acceptance] | None = None,
    schema_from: Sequence[tuple[dt.date, pa.Table]] | None = None,
) -> list[Anomaly]:
    """The window made of the last ``window`` + 1 tables (the last is the eval day), each day
    judged against the days before it, as the validation step does; the schema inferred from
    ``schema_from`` (default: the days before the window, as on a first run)."""
    config = config or ValidationConfig()
    stats = [st.compute(t, d) for d, t in tables]
    available = {s.date: s for s in stats}
    before = stats[: len(stats) - window - 1]
    basis = [st.compute(t, d) for d, t in schema_from] if schema_from is not None else before
    schema = data_schema.infer(COLUMNS, basis, "test", "v1")
    under = []
    for i, s in enumerate(stats[-window - 1 :]):
        history, label = reference.history_of(
            s.date, {d: v for d, v in available.items() if d < s.date}, config, False
        )
        under.append(DayUnderTest(s, "eval" if i == window else "train", history, label))
    found = window_anomalies(under, stats[-1].date, schema, config)
    return with_policies(found, config, accepted or {}, weekly=False)


def failing(anomalies: Sequence[Anomaly]) -> set[str]:
    return {a.kind for a in anomalies if a.policy == "fail"}


@pytest.fixture(scope="module")
def clean() -> list[tuple[dt.date, pa.Table]]:
    return days(FIRST, HISTORY + WINDOW + 1)


def _replace(
    tables: list[tuple[dt.date, pa.Table]], index: int, table: pa.Table
) -> list[tuple[dt.date, pa.Table]]:
    out = list(tables)
    out[index] = (out[index][0], table)
    return out


# ------------------------------------------------------------------------------------- statistics


def test_statistics_of_a_day_count_what_is_there() -> None:
    table = make_day(FIRST, 3, requests=50, slate=4)
    rate = table.column("pin_stats__save_rate_28d")
    table = table.set_column(
        table.schema.get_field_index("pin_stats__save_rate_28d"),
        "pin_stats__save_rate_28d",
        pc.if_else(pa.array(np.arange(len(table)) < 20), pa.nulls(len(table), rate.type), rate),
    )
    s = st.compute(table, FIRST)
    assert (s.rows, s.requests, s.rows_per_request) == (200, 50, 4.0)
    assert s.positives == int(np.sum(table.column("saved").to_numpy()))
    assert s.label_rate == pytest.approx(s.positives / 200)
    numeric = s.features["pin_stats__save_rate_28d"]
    assert isinstance(numeric, st.NumericStatistics)
    assert (numeric.nulls, numeric.count, numeric.type) == (20, 180, "double")
    values = rate.to_numpy()[20:]
    assert numeric.mean == pytest.approx(values.mean()) and numeric.std == pytest.approx(values.std())
    assert sum(numeric.histogram.values()) == 180 and (numeric.min, numeric.max) == (
        values.min(),
        values.max(),
    )
    age = s.features["pin_stats__age_days"]
    assert isinstance(age, st.NumericStatistics) and age.type == "int64"
    assert age.zeros == int((table.column("pin_stats__age_days").to_numpy() == 0).sum())
    country = s.features["user_stats__country"]
    assert isinstance(country, st.CategoricalStatistics) and country.complete
    assert sum(country.values.values()) == 200 and country.distinct == len(country.values)
    ids = s.features["pin_id"]
    assert isinstance(ids, st.CategoricalStatistics) and not ids.complete and len(ids.values) <= st.TOP_K
    assert s.duplicate_impressions == 0 and s.event_time_min.date() == FIRST  # type: ignore[union-attr]
    # Kish: 4 rows per request, equal: 50 effective requests; users repeat, so fewer effective users
    assert s.effective_rows["request_id"] == pytest.approx(50)
    assert s.effective_rows["user_id"] < 200


def test_histogram_bins_are_fixed_quarter_octaves() -> None:
    keys = st.bin_keys(np.array([0.0, 1.0, 1.1, 2.0, -3.0, 0.5, 1e30]))
    assert list(keys) == ["0", "+0", "+0", "+4", "-6", "+-4", "+256"]  # sign, then the bin
    low, high = st.bin_range("+4")
    assert (low, high) == pytest.approx((2.0, 2.0**1.25))


def test_merged_statistics_equal_those_of_the_days_taken_together() -> None:
    a, b = make_day(FIRST, 1), make_day(FIRST, 2, requests=150)
    merged = st.merge([st.compute(a, FIRST), st.compute(b, FIRST)])
    whole = st.compute(pa.concat_tables([a, b]), FIRST).features
    for name in ("user_stats__impressions_7d", "pin_stats__save_rate_28d", "pin_stats__category"):
        got, want = merged[name], whole[name]
        if isinstance(got, st.NumericStatistics) and isinstance(want, st.NumericStatistics):
            assert got.mean == pytest.approx(want.mean) and got.std == pytest.approx(want.std)
            assert got.histogram == want.histogram and (got.min, got.max) == (want.min, want.max)
        else:
            assert got == want


def test_request_sketches_tell_a_repeated_day() -> None:
    a, b = make_day(FIRST, 1), make_day(FIRST + dt.timedelta(days=1), 2)
    sa, sb = st.compute(a, FIRST), st.compute(b, FIRST)
    assert st.sketch_jaccard(sa.request_sketch, sa.request_sketch) == 1.0
    assert st.sketch_jaccard(sa.request_sketch, sb.request_sketch) == 0.0
    half = pa.concat_tables([a.slice(0, 2000), b.slice(2000)])
    assert st.sketch_jaccard(sa.request_sketch, st.compute(half, FIRST).request_sketch) == pytest.approx(
        1 / 3, abs=0.1
    )


def test_a_snapshot_dated_after_its_impression_is_counted() -> None:
    table = make_day(FIRST, 1, requests=20, slate=5)
    ts = table.column("event_timestamp")
    as_of = pc.subtract(ts, pa.scalar(dt.timedelta(hours=1), pa.duration("us")))
    later = pc.add(ts, pa.scalar(dt.timedelta(hours=1), pa.duration("us")))
    mixed = pc.if_else(pa.array(np.arange(100) < 7), later, as_of)
    s = st.compute(table.append_column("pin_stats__as_of", mixed.cast(ts.type)), FIRST)
    assert s.snapshots["pin_stats"].after_impression == 7 and s.snapshots["pin_stats"].joined == 100
    assert "pin_stats__as_of" not in s.features


def test_statistics_are_kept_beside_the_partition_and_recomputed_when_it_changes(tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    from ranking.core.hashing import sha256_file

    path = tmp_path / "examples.parquet"
    pq.write_table(make_day(FIRST, 1), path)
    digest = sha256_file(path)
    stats, fresh = st.load_or_compute(path, FIRST, digest)
    assert fresh and st.read(st.path_beside(path)) == stats
    again, fresh = st.load_or_compute(path, FIRST, digest)
    assert not fresh and again == stats
    pq.write_table(make_day(FIRST, 2), path)
    assert st.load_or_compute(path, FIRST, digest) == (stats, False)  # kept by the recorded sha256
    with pytest.raises(DataValidationError, match="not the file its window recorded"):
        st.load_or_compute(path, FIRST, "0" * 64)
    rebuilt, fresh = st.load_or_compute(path, FIRST, sha256_file(path))
    assert fresh and rebuilt.sha256 == sha256_file(path) != digest
    st.path_beside(path).write_text('{"format": 2, "torn')
    assert st.load_or_compute(path, FIRST, sha256_file(path))[1]  # a torn file is recomputed


# ------------------------------------------------------------------------------------- the schema


def test_the_schema_inferred_from_the_training_days() -> None:
    stats = [st.compute(t, d) for d, t in days(FIRST, 3)]
    schema = data_schema.infer(COLUMNS, stats, "w", "v1")
    rate = schema.features["pin_stats__save_rate_28d"]
    assert (rate.kind, rate.min_presence, rate.domain_min, rate.domain_max) == ("numeric", 0.0, 0.0, 1.0)
    assert schema.features["position"].min_presence == 1.0  # the impression's own: required
    count = schema.features["user_stats__impressions_7d"]
    assert (count.domain_min, count.domain_max) == (0.0, None)
    category = schema.features["pin_stats__category"]
    assert category.vocabulary is not None and len(category.vocabulary) == 12 and category.drift
    assert schema.features["pin_id"].vocabulary is None and not schema.features["pin_id"].drift
    # keyed by the columns' names and types only: a comment in the definitions keeps it
    assert schema.key == data_schema.schema_key(dict(reversed(list(COLUMNS.items()))))
    assert schema.key != data_schema.schema_key({**COLUMNS, "position": "int64"})


def test_a_hand_edit_that_does_not_parse_is_an_error_not_a_new_inference(tmp_path: Any) -> None:
    stats = [st.compute(t, d) for d, t in days(FIRST, 2)]
    schema = data_schema.infer(COLUMNS, stats, "w", "v1")
    path = data_schema.schema_path(tmp_path, COLUMNS)
    data_schema.write(path, schema)
    assert data_schema.read(path) == schema
    path.write_text(path.read_text().replace('"min_presence": 1.0', '"min_presence": "all"', 1))
    with pytest.raises(DataValidationError, match="does not parse"):
        data_schema.read(path)
    data_schema.write(tmp_path / "0000000000000000.json", schema)
    with pytest.raises(DataValidationError, match="copied from another schema"):
        data_schema.read(tmp_path / "0000000000000000.json")


# ------------------------------------------------------------------------------------- anomalies


def test_clean_days_raise_no_anomaly(clean: list[tuple[dt.date, pa.Table]]) -> None:
    found = judge(clean)
    assert found == [], [a.detail for a in found]


def _break_window(clean: list[tuple[dt.date, pa.Table]], transform: Any) -> list[tuple[dt.date, pa.Table]]:
    out = list(clean)
    for i in range(len(out) - WINDOW - 1, len(out) - 1):  # every training day, as the suite does
        out[i] = (out[i][0], transform(out[i][1], i))
    return out


@pytest.mark.parametrize(
    ("kind", "transform", "anomaly"),
    [
        ("zeroed_feature", lambda t, i: inject.zeroed_feature(t), "feature_all_zero"),
        ("null_spike", lambda t, i: inject.null_spike(t, seed=i), "null_rate_jump"),
        ("rehashed_category", lambda t, i: inject.rehashed_category(t), "schema_vocabulary"),
        ("rate_x100", lambda t, i: inject.rate_x100(t), "schema_domain"),
        ("label_rate_doubled", lambda t, i: inject.positives_twice(t), "label_rate_jump"),
    ],
)
def test_each_data_bug_is_stopped_by_its_anomaly(
    clean: list[tuple[dt.date, pa.Table]], kind: str, transform: Any, anomaly: str
) -> None:
    assert inject.DATA_KINDS[kind] == anomaly
    found = judge(_break_window(clean, transform))
    assert anomaly in failing(found), sorted({(a.kind, a.policy) for a in found})
    named = [a for a in found if a.kind == anomaly]
    assert all(a.value is not None and a.compared for a in named)


def test_a_repeated_day_and_duplicated_rows(clean: list[tuple[dt.date, pa.Table]]) -> None:
    i = len(clean) - 4
    repeated = _replace(clean, i, inject.redated(clean[i - 1][1]))
    found = judge(repeated)
    assert "day_repeated" in failing(found)
    (rep,) = [a for a in found if a.kind == "day_repeated"]
    assert rep.day == clean[i][0] and str(clean[i - 1][0]) in rep.compared and rep.value == 1.0
    doubled = _replace(clean, i, pa.concat_tables([clean[i][1], clean[i][1].slice(0, 3)]))
    assert "duplicate_rows" in failing(judge(doubled))


def test_training_rows_from_the_eval_day_are_a_leak(clean: list[tuple[dt.date, pa.Table]]) -> None:
    eval_table = clean[-1][1]
    leaky = _replace(clean, len(clean) - 2, pa.concat_tables([clean[-2][1], eval_table.slice(0, 50)]))
    found = judge(leaky)
    assert {"leakage_event_time", "event_time_outside_day"} <= failing(found)
    assert "leakage_event_time" not in failing(judge(clean))


def test_history_checks_only_warn_until_there_is_enough_history(
    clean: list[tuple[dt.date, pa.Table]],
) -> None:
    broken = _break_window(clean, lambda t, i: inject.zeroed_feature(t))
    short = broken[HISTORY - 3 :]  # 3 days of history before the window's first day
    found = [a for a in judge(short) if a.kind == "feature_all_zero"]
    assert found and all(a.policy == "warn" and (a.history_days or 0) < 7 for a in found)
    full = [a for a in judge(broken) if a.kind == "feature_all_zero"]
    assert full[0].policy == "fail" and full[0].day == broken[HISTORY][0] and full[0].history_days == 14


def test_an_accepted_anomaly_passes_with_its_reason(clean: list[tuple[dt.date, pa.Table]]) -> None:
    i = len(clean) - 4
    repeated = _replace(clean, i, inject.redated(clean[i - 1][1]))
    (rep,) = [a for a in judge(repeated) if a.kind == "day_repeated"]
    accepted = {rep.key: Acceptance(rep.key, "backfill replayed on purpose", "ops", "now")}
    (again,) = [a for a in judge(repeated, accepted=accepted) if a.kind == "day_repeated"]
    assert (again.policy, again.accepted) == ("accepted", "backfill replayed on purpose")


def test_a_policy_of_warn_keeps_the_run_going(clean: list[tuple[dt.date, pa.Table]]) -> None:
    broken = _break_window(clean, lambda t, i: inject.rate_x100(t))
    config = ValidationConfig(policy={"schema_domain": "warn", "drift": "warn", "skew": "warn"})
    found = judge(broken, config=config)
    assert "schema_domain" in {a.kind for a in found} and not failing(found)


def test_absolute_caps_are_off_by_default_and_on_when_set(clean: list[tuple[dt.date, pa.Table]]) -> None:
    assert not {a.kind for a in judge(clean)} & {"label_rate_bounds", "null_rate_cap"}
    capped = judge(clean, config=ValidationConfig(max_label_rate=0.01))
    assert "label_rate_bounds" in failing(capped)


def test_every_kind_has_a_meaning_and_a_valid_default_policy() -> None:
    config = ValidationConfig()
    assert set(config.policy) == set(KINDS) and all(KINDS[k] for k in KINDS)
    with pytest.raises(RankerError, match="policy of unknown kind"):
        ValidationConfig(policy={"nope": "fail"})
    with pytest.raises(RankerError, match="weekly must be one of"):
        ValidationConfig(weekly="sometimes")


# ------------------------------------------------------------------------------------- distances


def test_distances_and_their_sampling_noise() -> None:
    same = {"+1": 500, "+2": 500}
    assert js_divergence(same, same) == (0.0, pytest.approx(js_divergence(same, same)[1]))  # type: ignore[index]
    disjoint = js_divergence({"+1": 100}, {"+9": 100})
    assert disjoint is not None and disjoint[0] == pytest.approx(1.0)
    small, large = js_divergence(same, same, 10, 10), js_divergence(same, same, 10_000, 10_000)
    assert small is not None and large is not None and small[1] >= 99 * large[1]
    moved = linf_distance({"a": 50, "b": 50}, {"a": 90, "b": 10})
    assert moved is not None and moved[0] == pytest.approx(0.4)


def test_a_weekly_cycle_is_read_from_the_history() -> None:
    weekly = {
        FIRST + dt.timedelta(days=i): 10.0
        + (5.0 if (FIRST + dt.timedelta(days=i)).weekday() >= 5 else 0.0)
        + 0.1 * (i % 3)
        for i in range(35)
    }
    rng = np.random.default_rng(0)
    flat = {FIRST + dt.timedelta(days=i): float(rng.normal()) for i in range(35)}
    assert reference.weekday_share(weekly) > 0.9  # type: ignore[operator]
    assert reference.weekday_share(flat) < 0.6  # type: ignore[operator]
    assert reference.weekday_share(dict(list(flat.items())[:20])) is None  # too short to tell
    assert reference.weekday_share(dict.fromkeys(weekly, 10.126)) is None  # constant: no cycle
    stats = {d: st.compute(make_day(d, i), d) for i, d in enumerate(sorted(weekly))}
    day = FIRST + dt.timedelta(days=35)
    history, label = reference.history_of(day, stats, ValidationConfig(), weekly=True)
    assert [h.date.weekday() for h in history] == [day.weekday()] * 4 and "4 " in label
    history, _ = reference.history_of(day, stats, ValidationConfig(), weekly=False)
    assert len(history) == 14 and history[-1].date == day - dt.timedelta(days=1)


def test_a_join_that_lost_rows_is_told_from_new_entities(clean: list[tuple[dt.date, pa.Table]]) -> None:
    """One snapshot a day per entity: an entity joined on some of its rows and not on others is a
    join that lost rows; an entity missing on all of its rows is only new."""
    from features.validation.anomalies import day_anomalies

    i = len(clean) - 3
    day, table = clean[i]
    ts = table.column("event_timestamp")
    table = table.append_column(
        "pin_stats__as_of", pc.subtract(ts, pa.scalar(dt.timedelta(hours=1), pa.duration("us"))).cast(ts.type)
    )
    pins = table.column("pin_id").to_numpy()
    new_pins = pins % 50 == 0  # every row of these pins unjoined: new pins
    lost_rows = (np.arange(len(table)) % 97 == 0) & ~new_pins  # some rows of other pins

    def unjoined(rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
        out = table
        for name in columns:
            column = out.column(name)
            nulled = pc.if_else(pa.array(rows), pa.nulls(len(out), column.type), column)
            out = out.set_column(out.schema.get_field_index(name), name, nulled)
        return out

    view = [n for n in table.schema.names if n.startswith("pin_stats__")]

    def inconsistent(t: pa.Table) -> set[str]:
        found = day_anomalies(st.compute(t, day), clean[-1][0], "train", ValidationConfig())
        return {str(a.feature) for a in found if a.kind == "inconsistent_join"}

    assert not inconsistent(table) and not inconsistent(unjoined(new_pins, view))
    assert inconsistent(unjoined(new_pins | lost_rows, view)) == {
        n for n in view if not n.endswith("__as_of")
    }
    # one feature nulled on random rows (not the whole view) is told the same way
    assert inconsistent(unjoined(lost_rows, ["pin_stats__save_rate_28d"])) == {"pin_stats__save_rate_28d"}


def test_a_small_day_may_be_degenerate_by_chance(clean: list[tuple[dt.date, pa.Table]]) -> None:
    """A feature at 0 on every row of a day of two users is no news when its history has many
    zeros; the same on a day of hundreds of users is."""
    tiny = make_day(clean[-2][0], 99, requests=2, slate=10)
    column = "user_stats__saves_7d"
    zeros = pa.array(np.zeros(len(tiny), dtype=np.int64))
    tiny = tiny.set_column(tiny.schema.get_field_index(column), column, zeros)
    history = [(d, inject.null_spike(t, seed=0, share=0.0)) for d, t in clean[:-2]]
    # the history's share of zero saves: a few percent of rows; two users at 0 is then likely enough
    mostly_zero = [
        (
            d,
            t.set_column(
                t.schema.get_field_index(column),
                column,
                pc.multiply(t.column(column), pa.array((np.arange(len(t)) % 2 == 0).astype(np.int64))),
            ),
        )
        for d, t in history
    ]
    found = judge([*mostly_zero, (clean[-2][0], tiny), clean[-1]], window=1)
    assert "feature_all_zero" not in {a.kind for a in found}
    big = inject.zeroed_feature(clean[-2][1], column)
    found = judge([*mostly_zero, (clean[-2][0], big), clean[-1]], window=1)
    assert "feature_all_zero" in failing(found)


MANIFEST: dict[str, Any] = {
    "end": "2026-01-24",
    "days": 20,
    "train": [{}] * 18,
    "missing_days": ["2026-01-10", "2026-01-11"],
    "rows_train": 200_000,
    "rows_eval": 10_000,
    "label_rate": 0.04,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({}, None),
        ({"end": "2026-01-23"}, "its end 2026-01-23 is not the requested 2026-01-24"),
        ({"days": 10}, "10 training days, not the requested 20"),
        ({"rows_train": 0}, "rows_train is 0"),
        ({"rows_eval": None}, "rows_eval is None"),
        ({"missing_days": []}, "18 training days + 0 missing != 20"),
        ({"label_rate": 0.0}, "degenerate"),
    ],
)
def test_a_window_that_is_not_the_one_asked_for_is_named(change: dict[str, Any], message: str | None) -> None:
    """The checks the DAG alone ran (issue 30: one validation step for every caller)."""
    from features.validation.step import manifest_problems

    found = manifest_problems({**MANIFEST, **change}, dt.date(2026, 1, 24), 20)
    if message is None:
        assert found == []
    else:
        assert [a.kind for a in found] == ["window_incomplete"] and message in found[0].detail
