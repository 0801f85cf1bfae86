"""Pool the paired days of several backtests of the same two recipes (independent workspaces):
``python infra/backtest_pool.py BASELINE OTHER BACKTEST_DIR [BACKTEST_DIR ...]``.

Each backtest's (day, baseline, other) score pairs become units of one paired two-stage bootstrap
(``ranking.backtest.stats.compare``, the one ``ranker backtest`` reports): days from different
workspaces are independent, so pooling them narrows the CI. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.splitlines()[1], file=sys.stderr)
        return 2
    import pandas as pd

    from ranking.backtest.stats import compare, paired_day
    from ranking.config.model import BacktestSection

    # the shipped [backtest] bootstrap (backtests of several workspaces have no one config)
    boot = BacktestSection()

    baseline, other, folders = argv[0], argv[1], [Path(p) for p in argv[2:]]
    for folder in folders:
        if not (folder / baseline / "days").is_dir() or not (folder / other / "days").is_dir():
            print(f"{folder}: not a backtest of {baseline} and {other}", file=sys.stderr)
            return 2
    out = {"baseline": baseline, "other": other, "backtests": [str(f) for f in folders]}
    for who in ("served", "candidate"):
        pairs = []
        for folder in folders:
            for path in sorted((folder / baseline / "days").glob("*.json")):
                b = json.loads(path.read_text())
                o_path = folder / other / "days" / path.name
                if not o_path.is_file():
                    continue
                o = json.loads(o_path.read_text())
                b_rel, o_rel = (b.get(who) or {}).get("scores"), (o.get(who) or {}).get("scores")
                if b_rel and o_rel:
                    pairs.append(
                        paired_day(
                            b["day"],
                            pd.read_parquet(folder / baseline / b_rel),
                            pd.read_parquet(folder / other / o_rel),
                        )
                    )
        found = compare(pairs, samples=boot.bootstrap_samples, level=boot.ci_level, seed=boot.seed)
        out[who] = None if found is None else {k: v for k, v in found.to_dict().items() if k != "per_day"}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
