"""MovieLens-100K as an interaction log for ``ranker data import``, converted at run time.

The data ships inside the ``recbole==1.2.1`` wheel (``recbole/dataset_example/ml-100k/``); its
terms forbid redistribution, so it is never committed: this fetches the wheel with ``pip download
--no-deps`` (no install), reads ``ml-100k.inter`` out of it and writes a CSV
(``user_id,item_id,rating,timestamp,genre``) that ``ranker data import --rating-col rating
--label-threshold 4`` reads (a rating of 4 or 5 is the "save"); ``--item-attribute-col genre`` makes
the movie's first listed genre (from ``ml-100k.item``) the pin's category.

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
ITEMS = "recbole/dataset_example/ml-100k/ml-100k.item"
HEADER = ("user_id", "item_id", "rating", "timestamp")
NO_GENRE = "unknown"


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
        genres = _genres(archive.read(ITEMS).decode())
    reader = csv.reader(io.StringIO(text), delimiter="\t")
    header = [h.split(":")[0] for h in next(reader)]
    if tuple(header) != HEADER:
        raise SystemExit(f"{MEMBER}: unexpected columns {header}")
    rows = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow((*HEADER, "genre"))
        for user, item, rating, timestamp in reader:
            writer.writerow((user, item, rating, int(float(timestamp)), genres.get(item, NO_GENRE)))
            rows += 1
    tmp.replace(out)
    return rows


def _genres(text: str) -> dict[str, str]:
    """item id -> its first listed genre (``class:token_seq``, space-separated)."""
    reader = csv.reader(io.StringIO(text), delimiter="\t")
    header = [h.split(":")[0] for h in next(reader)]
    item, klass = header.index("item_id"), header.index("class")
    return {row[item]: (row[klass].split() or [NO_GENRE])[0] for row in reader if len(row) > klass}


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
