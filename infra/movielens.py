"""MovieLens-100K as an interaction log for ``ranker data import``, converted at run time.

The data ships inside the ``recbole==1.2.1`` wheel (``recbole/dataset_example/ml-100k/``); its
terms forbid redistribution, so it is never committed: this fetches the wheel with ``pip download
--no-deps`` (no install), reads ``ml-100k.inter`` out of it and writes a CSV
(``user_id,item_id,rating,timestamp``) that ``ranker data import --rating-col rating
--label-threshold 4`` reads (a rating of 4 or 5 is the "save").

    python infra/movielens.py --out DIR      # -> DIR/ml-100k.csv (the wheel cached in DIR)
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL = "recbole==1.2.1"
MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"
HEADER = ("user_id", "item_id", "rating", "timestamp")


def fetch_wheel(folder: Path, python: str = sys.executable) -> Path:
    """The recbole wheel in ``folder`` (downloaded once, without its dependencies)."""
    found = sorted(folder.glob("recbole-1.2.1-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [python, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL, "-d", str(folder)],
        check=True,
    )
    found = sorted(folder.glob("recbole-1.2.1-*.whl"))
    if not found:
        raise SystemExit(f"pip download {WHEEL} left no wheel in {folder}")
    return found[0]


def convert(wheel: Path, out: Path) -> int:
    """Write the ratings as CSV; returns the rows. RecBole's atomic file is tab-separated with
    typed headers (``user_id:token item_id:token rating:float timestamp:float``)."""
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(MEMBER).decode()
    reader = csv.reader(io.StringIO(text), delimiter="\t")
    header = [h.split(":")[0] for h in next(reader)]
    if tuple(header) != HEADER:
        raise SystemExit(f"{MEMBER}: unexpected columns {header}")
    rows = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        for user, item, rating, timestamp in reader:
            writer.writerow((user, item, rating, int(float(timestamp))))
            rows += 1
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python infra/movielens.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the wheel and ml-100k.csv")
    args = ap.parse_args(argv)
    target = args.out / "ml-100k.csv"
    rows = convert(fetch_wheel(args.out), target)
    print(f"{target}: {rows} ratings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
