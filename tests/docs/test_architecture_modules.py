"""docs/architecture.md's module table (`| path | job |`) names every module and package of
`ranking/`, `features/` and `dags/` (the DAG files and `dags/ranker_dags/`), so a module added or
moved without a word there fails here.

A row's path is a folder (`ranking/registry/`); a module or subpackage below it is named in the row
of the nearest folder the table lists, in backticks, by its name (`janitor`, `main.py`, `models/`)
or its path from that folder (`validation/step`). A subpackage with a row of its own is named by
that row. `__init__.py` and `__main__.py` are their package's.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
ROOTS = ("ranking", "features", "dags")
HEADER = "| path | job |"


def module_table(text: str) -> dict[str, str]:
    """`folder/ -> job` from the table under the `| path | job |` header."""
    assert HEADER in text, f"docs/architecture.md has no {HEADER!r} table"
    rows: dict[str, str] = {}
    for line in text.split(HEADER, 1)[1].splitlines()[2:]:  # past the header's separator row
        if not line.startswith("|"):
            break
        path, job = line.strip().strip("|").split("|", 1)
        rows[path.strip().strip("`").rstrip("/") + "/"] = job
    return rows


def named(job: str) -> set[str]:
    """What a job cell names: each backticked word, without a trailing `.py` or `/`."""
    return {token.removesuffix(".py").rstrip("/") for token in re.findall(r"`([^`]+)`", job)}


def modules(repo: Path) -> list[str]:
    """Every module and package under the roots, as repo paths (`ranking/cli/main.py`, `ranking/trainer/models/`)."""
    found: list[str] = []
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            rel = path.relative_to(repo)
            if "__pycache__" in rel.parts:
                continue
            if path.name in ("__init__.py", "__main__.py"):
                if rel.parent.as_posix() not in ROOTS:
                    found.append(rel.parent.as_posix() + "/")
            else:
                found.append(rel.as_posix())
    return sorted(set(found))


def unnamed(rows: dict[str, str], paths: list[str]) -> list[str]:
    """The paths the table does not name: no row covers them, or their row does not name them."""
    missing: list[str] = []
    for path in paths:
        if path in rows:
            continue  # a package with a row of its own
        covering = [row for row in rows if path.startswith(row) and path != row]
        if not covering:
            missing.append(f"{path} (no row covers it)")
            continue
        row = max(covering, key=len)
        rel = path.removeprefix(row).removesuffix(".py").rstrip("/")
        if not {rel, rel.rsplit("/", 1)[-1]} & named(rows[row]):
            missing.append(f"{path} (not in the {row} row)")
    return missing


def test_the_module_table_names_every_module() -> None:
    rows = module_table(ARCHITECTURE.read_text())
    missing = unnamed(rows, modules(REPO))
    assert not missing, "docs/architecture.md's module table does not name:\n" + "\n".join(missing)


def test_every_row_of_the_module_table_is_a_folder_that_exists() -> None:
    rows = module_table(ARCHITECTURE.read_text())
    assert [row for row in rows if not (REPO / row).is_dir()] == []


def test_the_check_catches_a_module_left_out(tmp_path: Path) -> None:
    """The check itself: a module its row does not name, a nested one named by its name, and a
    folder no row covers."""
    for rel in (
        "ranking/core/errors.py",
        "ranking/core/new.py",
        "ranking/trainer/models/config.py",
        "features/x/y.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "ranking/trainer/models/__init__.py").write_text("")
    table = "| path | job |\n| --- | --- |\n| `ranking/core/` | `errors` |\n| `ranking/trainer/` | `models/` (`config`) |\n"
    assert unnamed(module_table(table), modules(tmp_path)) == [
        "features/x/y.py (no row covers it)",
        "ranking/core/new.py (not in the ranking/core/ row)",
    ]
