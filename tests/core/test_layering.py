"""The package structure holds: no import cycle between packages, and ``features`` uses only
``ranking.core`` from ``ranking``. Every import counts, including those inside functions (a cycle
hidden behind a function-level import is still a cycle) and those under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "features":
        return "features"
    if parts[0] == "ranking" and len(parts) > 1:
        return f"ranking.{parts[1]}"
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for top in ("ranking", "features"):
        for path in (ROOT / top).rglob("*.py"):
            source = _package_of(_module_name(path))
            if source is None or source == "ranking.__init__":
                continue
            graph[source]
            for imported in _imports(path):
                target = _package_of(imported)
                # `from ranking import x` names ranking.x; a bare `ranking` is the root package
                if target and target != source and target in _known_packages():
                    graph[source].add(target)
    return dict(graph)


def _known_packages() -> set[str]:
    pkgs = {"features"}
    for path in (ROOT / "ranking").iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            pkgs.add(f"ranking.{path.name}")
    return pkgs


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_between_packages() -> None:
    graph = package_graph()
    assert "ranking.core" in graph and "ranking.cli" in graph  # the scan sees the tree
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = package_graph()
    graph = {k: set(v) for k, v in graph.items()}
    graph["ranking.core"].add("ranking.cli")  # core -> cli -> ... -> core
    assert find_cycle(graph) is not None


def test_features_uses_only_ranking_core() -> None:
    graph = package_graph()
    assert graph["features"] <= {"ranking.core"}, graph["features"]


def test_core_depends_on_nothing_else() -> None:
    assert package_graph()["ranking.core"] == set()


# the layers of docs/architecture.md, lowest first: a package imports only from lower layers
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"ranking.core"}),
    frozenset({"features"}),
    frozenset({"ranking.evaluation"}),
    frozenset({"ranking.monitoring"}),  # step summaries -> metrics; the steps publish through it
    frozenset({"ranking.registry"}),
    frozenset({"ranking.trainer"}),
    frozenset({"ranking.gate"}),
    frozenset({"ranking.config"}),
    # MLflow: records from the step summaries, sent or queued; the pipeline, backtests and reviews
    # track through it (their own records live with them: ranking/backtest/tracking.py, ...)
    frozenset({"ranking.tracking"}),
    frozenset({"ranking.pipeline", "ranking.study"}),
    frozenset({"ranking.backtest"}),  # replays the pipeline (ranker run, ranker pretrain)
    frozenset({"ranking.review"}),  # the weekly recipe review, on the backtest engine
    frozenset({"ranking.cli"}),
)


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    level = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
    problems = [f"{pkg} is in no layer" for pkg in sorted(graph) if pkg not in level]
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            if source in level and target in level and level[target] >= level[source]:
                problems.append(f"{source} imports {target} (not a lower layer)")
    return problems


def test_packages_import_only_lower_layers() -> None:
    assert layering_violations(package_graph()) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    graph = {k: set(v) for k, v in package_graph().items()}
    graph["ranking.registry"].add("ranking.trainer")
    assert layering_violations(graph) == ["ranking.registry imports ranking.trainer (not a lower layer)"]


# ---------------------------------------------------------------- cycles inside a package

MODULE_ROOTS = ("ranking", "features", "benchmarks")


def _all_modules() -> dict[str, Path]:
    return {_module_name(path): path for top in MODULE_ROOTS for path in (ROOT / top).rglob("*.py")}


def _imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The known modules ``path`` imports, relative imports resolved, ``from pkg import mod`` as
    ``pkg.mod``; every import counts, as between packages."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name in known and name != module}


def _package(module: str, modules: dict[str, Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules of its own package it imports (a package's ``__init__`` counts as
    one of its modules)."""
    modules = _all_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = {
            target
            for target in _imported_modules(path, module, set(modules))
            if _package(target, modules) == _package(module, modules)
        }
    return graph


def test_no_import_cycle_between_modules_of_a_package() -> None:
    graph = module_graph()
    assert {"ranking.cli.config", "ranking.cli.options", "benchmarks.train"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle inside a package: " + " -> ".join(cycle or [])


def test_the_module_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {k: set(v) for k, v in module_graph().items()}
    assert "ranking.cli.common" in graph["ranking.cli.options"]  # the scan sees real imports
    graph["ranking.cli.common"].add("ranking.cli.options")  # common -> options -> common
    assert find_cycle(graph) is not None
