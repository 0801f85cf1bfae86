"""`make bench` / `python -m benchmarks [NAME ...]`: run the benchmarks one after another.

Each benchmark module has a `main(argv)` and prints its figures (medians, ratios against a baseline
measured in the same run). Figures are recorded in docs/ with the command that produced them.
"""

from __future__ import annotations

import importlib
import sys
import time

BENCHMARKS = ("window", "validation", "train", "scale")


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    for name in names:
        if name not in BENCHMARKS:
            print(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
            return 2
    for name in names:
        print(f"== benchmarks.{name}", flush=True)
        start = time.perf_counter()
        rc = importlib.import_module(f"benchmarks.{name}").main([])
        print(f"== benchmarks.{name}: rc={rc} in {time.perf_counter() - start:.1f} s", flush=True)
        if rc:
            return int(rc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
