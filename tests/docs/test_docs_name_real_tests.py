"""Every test the docs name exists (issue 33): docs/reliability.md and the others cite tests as
`tests/x/test_y.py`, `test_y.py::test_z` or, after one of those in the same line, `::test_z`; a
renamed file or test would leave them pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"`((?:[\w/.-]+/)?test_\w+\.py)?((?:::[\w*]+)+)?(?:\[[^`]*\])?`")


def test_files(repo: Path) -> dict[str, list[Path]]:
    """Test files by name: the docs often give only the name."""
    found: dict[str, list[Path]] = {}
    for path in sorted((repo / "tests").rglob("test_*.py")):
        found.setdefault(path.name, []).append(path)
    return found


test_files.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def defines(files: list[Path], name: str) -> bool:
    pattern = re.escape(name).replace(r"\*", r"\w*")
    return any(re.search(rf"^\s*(?:async )?(?:def|class) {pattern}\b", f.read_text(), re.M) for f in files)


def dangling(repo: Path, text: str, where: str) -> list[str]:
    """The citations in ``text`` of a test file or test that does not exist."""
    by_name = test_files(repo)
    missing: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        cited: list[Path] | None = None  # the file the line named last
        for match in CITATION.finditer(line):
            path, names = match.group(1), match.group(2)
            if path:
                cited = [repo / path] if "/" in path else by_name.get(path, [])
                if not all(f.is_file() for f in cited) or not cited:
                    missing.append(f"{where}:{number}: {path}")
                    cited = None
                    continue
            if names and cited:
                name = names.rsplit("::", 1)[-1]
                if not defines(cited, name):
                    missing.append(f"{where}:{number}: {name} is not in {cited[0].relative_to(repo)}")
    return missing


def test_every_test_the_docs_name_exists() -> None:
    docs = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    missing = [m for doc in docs for m in dangling(REPO, doc.read_text(), str(doc.relative_to(REPO)))]
    assert missing == [], "the docs name tests that do not exist:\n" + "\n".join(missing)


def test_the_check_catches_a_renamed_file_or_test(tmp_path: Path) -> None:
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "tests" / "a" / "test_one.py").write_text("def test_kept():\n    pass\n")
    text = (
        "| x | `test_one.py::test_kept`, `::test_gone`, `test_one.py::test_ke*` |\n"
        "| y | `tests/a/test_two.py`, `test_three.py::test_kept`, `::test_kept` |\n"
    )
    assert dangling(tmp_path, text, "doc.md") == [
        "doc.md:1: test_gone is not in tests/a/test_one.py",
        "doc.md:2: tests/a/test_two.py",
        "doc.md:2: test_three.py",
    ]
