"""The slice guard's false rejections and power: `python -m benchmarks.slice_guard_power --home H
[--suite gate-suite] [--recipe default] [--out FILE]`.

Reads a workspace whose gate suite ran (`ranker backtest --inject all --name gate-suite`: every
clean candidate's scores on each eval day are kept under
``<home>/backtests/<suite>/<recipe>/suite/scores``). On each eval day after the first it judges,
with ``run_gate`` and the shipped ``[slices]``:
- **clean**: the day's candidate against the day before's candidate (as the daily run would);
- three candidates that break one slice only, against the day's clean candidate: the slates of the
  day's 3rd and 4th most frequent countries, and of its first-seen users, ranked at random (the
  scores permuted within each slate: ``ranking.backtest.inject.first_seen_shuffled``).
For each, whether the slice guard rejected it with whole slates judged (the default) and with
``slice_guard_partial`` (pin tiers judged too), whether any other check did, the guard alone (what
it adds) and the gate as a whole. Writes the tallies
and the clean days' rejections as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

_CANDIDATE = re.compile(r"^c-(\d{4}-\d{2}-\d{2})@(\d{4}-\d{2}-\d{2})\.parquet$")
_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


def _days(scores: Path) -> list[dt.date]:
    """Eval days with both the day's candidate and the day before's scored on it."""
    found = {(m[1], m[2]) for p in scores.iterdir() if (m := _CANDIDATE.match(p.name))}
    return sorted(
        dt.date.fromisoformat(day)
        for trained, day in found
        if trained == day and ((dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat(), day) in found
    )


def judge_day(home: Path, scores: Path, day: dt.date) -> dict[str, dict[str, Any]]:
    """The clean and the three broken candidates of ``day``: rejected by the guard (whole slates;
    partial) and by the other checks."""
    import pandas as pd

    from ranking.backtest.inject import first_seen_requests, first_seen_shuffled
    from ranking.config.loader import load
    from ranking.evaluation.slices import slice_frame
    from ranking.gate.checks import run_gate

    config = load(home).config
    window = home / "windows" / f"{day.isoformat()}_{config.window.days}d" / "manifest.json"
    examples = pd.read_parquet(json.loads(window.read_text())["eval"]["path"])
    candidate = pd.read_parquet(scores / f"c-{day}@{day}.parquet")
    champion = pd.read_parquet(scores / f"c-{day - dt.timedelta(days=1)}@{day}.parquet")
    requests = examples.drop_duplicates("request_id")
    countries = requests["user_stats__country"].value_counts().index
    broken = {
        f"country_{rank}": first_seen_shuffled(
            candidate,
            set(requests["request_id"][requests["user_stats__country"] == countries[rank - 1]]),
            day.toordinal(),
        )
        for rank in (3, 4)
    }
    broken["first_seen"] = first_seen_shuffled(candidate, first_seen_requests(examples), day.toordinal())
    slices = slice_frame(examples, config.slices.slice_config())
    out = {}
    for label, (cand, champ) in {
        "clean": (candidate, champion),
        **{k: (v, candidate) for k, v in broken.items()},
    }.items():
        verdict: dict[str, Any] = {}
        for partial in (False, True):
            gate = config.gate.gate_config().model_copy(
                update={"slice_guard_partial": partial, "allow_unfair": True}
            )
            report = run_gate(cand, champ, gate, slices=slices)
            failed = report.failed_checks
            verdict["partial" if partial else "whole_slates"] = "slice_guard" in failed
            if not partial:
                verdict["other_checks"] = any(c != "slice_guard" for c in failed)
                if label == "clean" and "slice_guard" in failed:
                    verdict["detail"] = next(c.detail for c in report.checks if c.name == "slice_guard")
        out[label] = verdict
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.slice_guard_power")
    parser.add_argument("--home", type=Path, required=False)
    parser.add_argument("--suite", default="gate-suite")
    parser.add_argument("--recipe", default="default")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.home is None:
        print("slice_guard_power: --home (a workspace whose gate suite ran) is required", file=sys.stderr)
        return 2
    if not (_NAME.match(args.suite) and _NAME.match(args.recipe)):
        print("slice_guard_power: --suite and --recipe are names (letters, digits, _.+-)", file=sys.stderr)
        return 2
    scores = args.home / "backtests" / args.suite / args.recipe / "suite" / "scores"
    if not scores.is_dir():
        print(f"slice_guard_power: no gate suite scores at {scores}", file=sys.stderr)
        return 2
    days = _days(scores)
    tallies: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    clean_rejections: list[dict[str, Any]] = []
    for i, day in enumerate(days, 1):
        verdicts = judge_day(args.home, scores, day)
        for label, verdict in verdicts.items():
            verdict["only_the_guard"] = verdict["whole_slates"] and not verdict["other_checks"]
            verdict["any_check"] = verdict["whole_slates"] or verdict["other_checks"]
            for key in ("whole_slates", "partial", "other_checks", "only_the_guard", "any_check"):
                tallies[label][key] += int(verdict[key])
            if label == "clean" and verdict["whole_slates"]:
                clean_rejections.append({"day": day.isoformat(), "detail": verdict["detail"]})
        print(f"[{i}/{len(days)}] {day}", flush=True)
    result = {
        "home": str(args.home),
        "days": len(days),
        "tallies": tallies,
        "clean_rejections": clean_rejections,
    }
    columns = ("whole_slates", "partial", "other_checks", "only_the_guard", "any_check")
    print(f"{'rejected by':<12} " + " ".join(f"{c:>15}" for c in columns))
    for label, t in tallies.items():
        print(f"{label:<12} " + " ".join(f"{f'{t[c]}/{len(days)}':>15}" for c in columns))
    if args.out:
        from ranking.core.atomic import atomic_write_json

        atomic_write_json(args.out, json.loads(json.dumps(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
