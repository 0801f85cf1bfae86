"""The data validation step (``ranker features validate``; a node of ``ranker run``, the DAG's
``validate_window`` task, the backtest and the review): a built window's statistics against the
kept schema and the deployment's history, before anything trains on it.

Reads the window manifest and each partition's statistics (computed now for a partition built
before statistics existed, or changed since: the backfill), the kept schema (inferred on first
use), each day's history (the days before it that the workspace has statistics of) and the
operator's acceptances; writes ``<home>/validation/windows/<end>_<days>d/`` (``validation.json``,
``report.md``, ``drift.png``), which ``ranker train`` records with the version. The verdict is
``fail`` when an anomaly's policy is fail: the step then exits 2 with one line naming it.

Workspace layout (docs/architecture.md)::

    validation/schema/<key>.json        the kept schema (features.validation.data_schema)
    validation/accepted.jsonl           acceptances: kind[:feature]@day, reason, who, when
    validation/windows/<end>_<days>d/   each window's result and report
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from features.validation import data_schema, reference
from features.validation.anomalies import (
    KINDS,
    LEAK_KINDS,
    Acceptance,
    DayUnderTest,
    ValidationConfig,
    drift_scores,
    window_anomalies,
    with_policies,
)
from features.validation.statistics import DayStatistics, load_or_compute
from ranking.core.atomic import atomic_write_json, read_json
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.summaries import Anomaly, ValidationSummary
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from features.window import WindowManifest, WindowPartition

log = logging.getLogger(__name__)

RESULT = "validation.json"
ACCEPTED = "accepted.jsonl"
# days of statistics read to tell a weekly cycle (eight weeks)
_WEEKLY_LOOKBACK_DAYS = 56


@dataclass(frozen=True)
class ValidationRequest:
    """Validate the built window ending ``end`` (its eval day), ``days`` training days long."""

    workspace: Workspace
    end: dt.date
    days: int
    config: ValidationConfig = field(default_factory=ValidationConfig)
    # where the history, the kept schema and the acceptances are read (default: the workspace):
    # the gate suite validates a window it made against the real deployment's history
    history: Workspace | None = None

    @property
    def history_workspace(self) -> Workspace:
        return self.history or self.workspace


def validation_dir(ws: Workspace) -> Path:
    return ws.root / "validation"


def result_dir(ws: Workspace, end: dt.date, days: int) -> Path:
    return validation_dir(ws) / "windows" / f"{end.isoformat()}_{int(days)}d"


def read_result(ws: Workspace, end: dt.date, days: int) -> ValidationSummary | None:
    """The recorded validation of the window (None: never validated, or a file that does not
    parse, which counts as not validated)."""
    path = result_dir(ws, end, days) / RESULT
    try:
        return ValidationSummary.model_validate(read_json(path), extra="ignore")
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- the window's days


def manifest_problems(manifest: Mapping[str, Any], end: dt.date, days: int) -> list[Anomaly]:
    """The window is the one asked for, every day is accounted for and its labels are not
    degenerate (what the DAG alone checked before, now for every caller). ``manifest`` is the file
    as it holds it, unparsed (``features.window.load_manifest``): what is wrong with it is reported
    as anomalies, where parsing it would refuse the window."""
    problems = []
    if manifest.get("end") != end.isoformat():
        problems.append(f"its end {manifest.get('end')} is not the requested {end}")
    if int(manifest.get("days") or 0) != days:
        problems.append(f"it has {manifest.get('days')} training days, not the requested {days}")
    train, missing = list(manifest.get("train") or []), list(manifest.get("missing_days") or [])
    if len(train) + len(missing) != days:
        problems.append(f"{len(train)} training days + {len(missing)} missing != {days}")
    for key in ("rows_train", "rows_eval"):
        if int(manifest.get(key) or 0) <= 0:
            problems.append(f"{key} is {manifest.get(key)}: the window is empty")
    rate = manifest.get("label_rate")
    if rate is not None and not 0.0 < float(rate) < 1.0:
        problems.append(f"label rate {rate} is degenerate (no positives or no negatives)")
    return [
        Anomaly(
            kind="window_incomplete",
            feature=None,
            day=end,
            statistic="manifest",
            value=None,
            threshold=None,
            compared="the request",
            detail=f"window {end} ({days}d): {problem}",
        )
        for problem in problems
    ]


def _window_days(window: WindowManifest) -> list[tuple[WindowPartition, str]]:
    return [(p, "train") for p in window.train] + [(window.eval, "eval")]


def _partition_stats(entry: WindowPartition) -> tuple[DayStatistics, bool]:
    return load_or_compute(entry.path, entry.date, entry.sha256)


def _history_stats(
    ws: Workspace, feature_version: str, before: dt.date, lookback: int
) -> dict[dt.date, DayStatistics]:
    """Statistics of the workspace's built partitions for the ``lookback`` days before
    ``before`` (of the current feature definitions; the newest partition of a day when it was
    rebuilt), backfilled where a partition has none yet."""
    from features.partitions import partition_problem, read_record

    found: dict[dt.date, DayStatistics] = {}
    days_dir = ws.windows / "days"
    for offset in range(lookback, 0, -1):
        day = before - dt.timedelta(days=offset)
        folder = days_dir / day.isoformat()
        if not folder.is_dir():
            continue
        candidates = sorted(
            (p for p in folder.iterdir() if (p / "partition.json").is_file()),
            key=lambda p: (p / "partition.json").stat().st_mtime,
            reverse=True,
        )
        for part in candidates:
            record, problem = read_record(part / "partition.json")
            if record is None or record.get("feature_version") != feature_version:
                continue
            problem = partition_problem(part / "examples.parquet", record)
            if problem is not None:
                log.warning("history: the partition of %s is left out: %s", day, problem)
                continue
            try:
                found[day], _ = load_or_compute(part / "examples.parquet", day, str(record["sha256"]))
            except DataValidationError as exc:
                log.warning("history: %s", exc)
                continue
            break
    return found


# --------------------------------------------------------------------------- schema, acceptances


def _kept_schema(
    history: Workspace,
    columns: Mapping[str, str],
    train: Sequence[DayStatistics],
    window: str,
    feature_version: str,
) -> tuple[data_schema.DataSchema, Path, bool, list[Anomaly]]:
    """The kept schema of these columns (inferred now when there is none), its path, whether it
    was inferred, and an anomaly when the columns changed under unchanged feature definitions."""
    folder = validation_dir(history) / "schema"
    path = data_schema.schema_path(folder, columns)
    schema = data_schema.read(path)
    if schema is not None:
        updated = data_schema.with_feature_version(schema, feature_version)
        if updated is not schema:
            data_schema.write(path, updated)
        return updated, path, False, []
    changed: list[Anomaly] = []
    for other in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        previous = data_schema.read(other)
        if previous is not None and feature_version in previous.feature_versions:
            diff = sorted(set(previous.columns.items()) ^ set(columns.items()))
            changed.append(
                Anomaly(
                    kind="schema_type",
                    feature=None,
                    day=None,
                    statistic="columns",
                    value=None,
                    threshold=None,
                    compared=f"data schema {previous.key}",
                    detail=f"the example columns changed under the same feature definitions ({feature_version}): {diff[:6]}",
                )
            )
    schema = data_schema.infer(columns, train, window, feature_version)
    data_schema.write(path, schema)
    log.info("data schema inferred from window %s: %s", window, path)
    return schema, path, True, changed


def read_acceptances(history: Workspace) -> dict[str, Acceptance]:
    """The operator's acceptances, the latest per anomaly key (a torn last line is ignored)."""
    path = validation_dir(history) / ACCEPTED
    found: dict[str, Acceptance] = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return found
    for line in lines:
        try:
            row = json.loads(line)
            found[str(row["key"])] = Acceptance(
                str(row["key"]), str(row["reason"]), str(row["who"]), str(row["when"])
            )
        except (ValueError, KeyError, TypeError):
            log.warning("%s: a line that is not an acceptance is ignored", path)
    return found


def parse_anomaly_key(key: str) -> tuple[str, str | None, dt.date | None]:
    """``kind[:feature]@YYYY-MM-DD`` (``@-`` for an anomaly of no one day) as the report names it."""
    head, sep, day_text = key.rpartition("@")
    kind, _, feature = head.partition(":")
    if not sep or not kind:
        raise RankerError(f"--anomaly {key!r}: expected KIND[:FEATURE]@YYYY-MM-DD, as the report names it")
    if kind not in KINDS:
        raise RankerError(f"--anomaly {key!r}: unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    if day_text == "-":
        return kind, feature or None, None
    try:
        return kind, feature or None, dt.date.fromisoformat(day_text)
    except ValueError:
        raise RankerError(f"--anomaly {key!r}: {day_text!r} is not a date (YYYY-MM-DD)") from None


def accept(history: Workspace, key: str, reason: str, who: str) -> Acceptance:
    """Record an operator's acceptance of one anomaly (``kind[:feature]@YYYY-MM-DD``), appended
    to ``validation/accepted.jsonl`` with who and when, as a forced promotion is."""
    parse_anomaly_key(key)
    if not reason.strip() or any(ord(c) < 32 for c in reason) or len(reason) > 1000:
        raise RankerError("--reason must be one line of text (at most 1000 characters)")
    acceptance = Acceptance(key, reason.strip(), who, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    path = validation_dir(history) / ACCEPTED
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"key": key, "reason": acceptance.reason, "who": who, "when": acceptance.when})
    with open(path, "a+b") as f:  # a torn last line (a killed writer) must not swallow this one
        f.seek(0, 2)
        if f.tell():
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(line.encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return acceptance


# --------------------------------------------------------------------------- the step


def validate_window(req: ValidationRequest) -> ValidationSummary:
    """Validate the window and record the result (see the module); never raises on anomalies:
    the summary's verdict says. Raises DataValidationError when there is no window to validate."""
    from features.window import load_manifest, read_window_manifest

    started = time.perf_counter()
    ws, config = req.workspace, req.config
    anomalies = manifest_problems(load_manifest(ws, req.end, req.days), req.end, req.days)
    window = read_window_manifest(ws.window_manifest(req.end, req.days))
    entries = _window_days(window)
    stats: list[tuple[DayStatistics, str]] = []
    computed = 0
    for entry, role in entries:
        found, fresh = _partition_stats(entry)
        stats.append((found, role))
        computed += fresh
    train = [s for s, role in stats if role == "train"]
    feature_version = window.feature_version
    columns = dict(window.columns or {})
    window_name = f"{req.end}_{req.days}d"
    first = min(s.date for s, _ in stats)
    lookback = max(config.history_days, 7 * config.weekly_history_weeks, _WEEKLY_LOOKBACK_DAYS)
    available = _history_stats(
        req.history_workspace, feature_version, req.end, lookback + (req.end - first).days
    )
    # a first run infers the schema from every training day it can see: the window's, and the
    # days before it the deployment already built (a vocabulary seen once is in it)
    earlier = [available[d] for d in sorted(available) if d < first]
    schema, schema_file, inferred, changed = _kept_schema(
        req.history_workspace, columns, [*earlier, *train], window_name, feature_version
    )
    anomalies += changed

    weekly = config.weekly == "on" or (
        config.weekly == "auto" and reference.has_weekly_cycle([available[d] for d in sorted(available)])
    )
    under_test = []
    for day_stats, role in stats:
        history, label = reference.history_of(day_stats.date, available, config, weekly)
        under_test.append(DayUnderTest(day_stats, role, history, label))  # type: ignore[arg-type]
    anomalies += window_anomalies(under_test, req.end, schema, config)
    judged = with_policies(anomalies, config, read_acceptances(req.history_workspace), weekly)

    counts = {p: sum(1 for a in judged if a.policy == p) for p in ("fail", "warn", "accepted")}
    verdict = "fail" if counts["fail"] else ("warn" if counts["warn"] else "pass")
    newest = under_test[-2] if len(under_test) > 1 else under_test[-1]
    drift = drift_scores([newest.stats], newest.reference, schema) if newest.reference else {}
    skew = drift_scores([stats[-1][0]], train, schema) if train else {}
    folder = result_dir(ws, req.end, req.days)
    summary = ValidationSummary(
        window_id=window.window_id,
        end=req.end,
        days=req.days,
        verdict=verdict,  # type: ignore[arg-type]
        anomalies=judged,
        counts=counts,  # type: ignore[arg-type]
        leak_checked=bool(train) and all(s.event_time_max is not None for s in train),
        leak_clean=not any(a.kind in LEAK_KINDS for a in judged),
        schema_path=str(schema_file),
        schema_inferred=inferred,
        weekly=weekly,
        drift=drift,
        skew=skew,
        statistics_computed=computed,
        report=str(folder / "report.md"),
        duration_seconds=round(time.perf_counter() - started, 3),
    )
    _record(folder, summary, under_test)
    return summary


def _record(folder: Path, summary: ValidationSummary, days: Sequence[DayUnderTest]) -> None:
    """validation.json, report.md and drift.png: for people (the report) and for `ranker train`
    (the result it records with the version). Written last, atomically."""
    from features.validation.report import write_report

    write_report(folder, summary, days)
    atomic_write_json(folder / RESULT, summary.body())


def failure_line(summary: ValidationSummary) -> str:
    """The one line a failed validation exits with: the first failing anomaly and the counts."""
    failing = [a for a in summary.anomalies if a.policy == "fail"]
    head = failing[0]
    return (
        f"data validation failed on window {summary.end} ({summary.days}d): {head.kind}"
        f"{' ' + head.feature if head.feature else ''}"
        f"{' on ' + head.day.isoformat() if head.day else ''}: {head.detail}"
        f" ({summary.counts['fail']} failing, {summary.counts['warn']} warning; report {summary.report};"
        f" accept one with `ranker features accept --anomaly {head.key} --reason ...`)"
    )
