"""Count the untyped mappings in product code: every ``dict[str, Any]`` and ``Mapping[str, Any]``
(``Dict``, ``MutableMapping`` too, and ``object`` for ``Any``: renaming the hole is not a type) written in ``ranking/``, ``features/`` and ``dags/``, and every use
of a name aliased to one (``Plan = dict[str, Any]``), by the AST (issue 33: a step's summary, a
verdict or a manifest passed as such a dict is a type built and thrown away).

    python infra/untyped_dicts.py            # the total and the files with the most
    python infra/untyped_dicts.py --max 60   # exit 1 above 60 (what issue 33 asks for)
    python infra/untyped_dicts.py --json     # per file, for a report
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ranking", "features", "dags")
MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping"}
UNTYPED_VALUES = {"Any", "object"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # typing.Mapping, collections.abc.Mapping
        return node.attr
    return None


def is_untyped_mapping(node: ast.AST) -> bool:
    """``dict[str, Any]`` and its kin (the key ``str``, the value ``Any`` or ``object``)."""
    if not (isinstance(node, ast.Subscript) and _name(node.value) in MAPPINGS):
        return False
    args = node.slice
    if not (isinstance(args, ast.Tuple) and len(args.elts) == 2):
        return False
    key, value = args.elts
    return _name(key) == "str" and _name(value) in UNTYPED_VALUES


def _string_annotations(tree: ast.AST) -> list[ast.AST]:
    """Annotations written as strings ("dict[str, Any]"), parsed."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and ("Any" in node.value or "object" in node.value)
        ):
            try:
                found.append(ast.parse(node.value, mode="eval"))
            except SyntaxError:
                continue
    return found


def count_file(path: Path) -> int:
    """Untyped mappings written in ``path``, and uses of the aliases it declares."""
    tree = ast.parse(path.read_text(), filename=str(path))
    aliases = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and is_untyped_mapping(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    } | {  # Plan: TypeAlias = dict[str, Any]
        node.target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.value is not None
        and is_untyped_mapping(node.value)
    }
    written = sum(1 for node in ast.walk(tree) if is_untyped_mapping(node))
    written += sum(
        1 for parsed in _string_annotations(tree) for node in ast.walk(parsed) if is_untyped_mapping(node)
    )
    alias_uses = sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id in aliases and isinstance(node.ctx, ast.Load)
    )
    return written + alias_uses


def count(root: Path = REPO) -> Counter[str]:
    found: Counter[str] = Counter()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            n = count_file(path)
            if n:
                found[str(path.relative_to(root))] = n
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=None, help="exit 1 when the total is above this")
    parser.add_argument("--json", action="store_true", help="per file, as JSON")
    parser.add_argument("--top", type=int, default=15, help="files listed (default: %(default)s)")
    args = parser.parse_args(argv)
    found = count()
    total = sum(found.values())
    if args.json:
        print(json.dumps({"total": total, "files": dict(found.most_common())}, indent=2))
    else:
        print(
            f"{total} untyped mappings (dict/Mapping[str, Any | object] and their aliases) in {', '.join(PACKAGES)}"
        )
        for name, n in found.most_common(args.top):
            print(f"{n:5d}  {name}")
    if args.max is not None and total > args.max:
        print(f"above the budget of {args.max}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
