"""Data validation cost: `python -m benchmarks.validation [--requests-per-day N] [--days D] [--repeats R] [--out FILE]`.

What the data validation adds to the window step (issue 30's bound: at most 10 % when one
partition is new, 25 % on a cold build), on one synthetic workspace, both arms in the same run,
alternating, the median of ``--repeats`` each:

- *cold*: every partition of a ``--days`` window built (plus the eval day): the window step as it
  was before (no statistics) vs the window step computing each partition's statistics plus the
  validation step (``ranker features validate``: statistics read, every day judged against the
  kept schema and its history, the report and its plot written; the schema is inferred once, by
  the warm-up, as a deployment infers it on its first run);
- *one new partition*: the next day's window (20 partitions reused, the eval day built), the same
  two arms.

The baseline arm is the same build with the statistics switched off (``features.window``'s
statistics module replaced by a no-op for that call), so both arms run the same Feast joins.
Figures are recorded in docs/data.md ("Data validation: cost").
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

START = dt.date(2026, 1, 1)


@contextlib.contextmanager
def _no_statistics() -> Iterator[None]:
    """The window step as it was before the data validation: no statistics per partition."""
    import features.window as window

    real = window.day_statistics
    window.day_statistics = types.SimpleNamespace(  # type: ignore[assignment]
        compute=lambda *a, **k: None, write=lambda *a, **k: None, path_beside=lambda p: p
    )
    try:
        yield
    finally:
        window.day_statistics = real


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.validation")
    ap.add_argument(
        "--requests-per-day", type=int, default=10_000, help="x 25 impressions a day (the window benchmark's)"
    )
    ap.add_argument("--days", type=int, default=20, help="window length")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="write the figures (JSON) here too")
    ap.add_argument("--keep", default=None, help="workspace folder to use and keep (default: a temp dir)")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)

    from features import feast_repo, window
    from features.synth import SynthConfig, generate
    from features.validation.step import ValidationRequest, validate_window, validation_dir
    from ranking.core.workspace import Workspace

    home = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-validation-"))
    ws = Workspace.resolve(home)
    end = START + dt.timedelta(days=args.days)
    nxt = end + dt.timedelta(days=1)
    generate(ws, SynthConfig(start=START, days=args.days + 2, requests_per_day=args.requests_per_day))
    feast_repo.apply(ws)

    def validate(day: dt.date) -> None:
        # a deployment's day: the kept schema (inferred by the warm-up), this window's result anew
        shutil.rmtree(validation_dir(ws) / "windows", ignore_errors=True)
        validate_window(ValidationRequest(ws, day, args.days))

    def cold(with_validation: bool) -> float:
        shutil.rmtree(ws.windows, ignore_errors=True)
        if with_validation:
            return _timed(lambda: window.build_window(ws, end, args.days)) + _timed(lambda: validate(end))
        with _no_statistics():
            return _timed(lambda: window.build_window(ws, end, args.days))

    def one_new(with_validation: bool) -> float:
        shutil.rmtree(ws.windows / "days" / nxt.isoformat(), ignore_errors=True)
        if with_validation:
            return _timed(lambda: window.build_window(ws, nxt, args.days)) + _timed(lambda: validate(nxt))
        with _no_statistics():
            return _timed(lambda: window.build_window(ws, nxt, args.days))

    figures: dict[str, Any] = {
        "days": args.days,
        "requests_per_day": args.requests_per_day,
        "repeats": args.repeats,
    }
    for name, arm in (("cold", cold), ("one_new_partition", one_new)):
        base, validated = [], []
        arm(True)  # warm-up: imports, Feast's registry, the page cache
        for _ in range(args.repeats):
            base.append(arm(False))
            validated.append(arm(True))
        if name == "cold":  # leave a complete window with statistics for the next arm's reuse
            cold(True)
        b, v = statistics.median(base), statistics.median(validated)
        figures[name] = {
            "window_step_seconds_median": round(b, 3),
            "with_validation_seconds_median": round(v, 3),
            "added_ratio": round(v / b - 1.0, 4),
            "baseline_seconds": [round(x, 3) for x in base],
            "validated_seconds": [round(x, 3) for x in validated],
        }
        print(f"{name}: window step {b:.2f} s, with validation {v:.2f} s ({v / b - 1:+.1%})", flush=True)
    print(json.dumps(figures, indent=2), flush=True)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
