"""The docs' quoted defaults against the code (issue 26): the retrain Params table of
docs/orchestration.md against dags/ranker_dags/params.py and `ranker config show`, the defaults
the Params' descriptions quote, and docs/backtest.md's annotated config (every key with its default).

Runs in .venv (`make test-py`): params.py is plain data without Airflow (imported by path, as
tests/config/test_config.py does).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ORCHESTRATION = REPO / "docs" / "orchestration.md"
BACKTEST = REPO / "docs" / "backtest.md"
NOT_CONFIG = "–"


def _params_module() -> Any:
    # params.py imports the package's pure JSON types (ranker_dags.json_values): no Airflow
    if str(REPO / "dags") not in sys.path:
        sys.path.append(str(REPO / "dags"))
    spec = importlib.util.spec_from_file_location(
        "docs_dag_params", REPO / "dags" / "ranker_dags" / "params.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_dag_params"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shipped_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`ranker config show --json` with nothing but the built-in defaults (no file, no RANKER_* env)."""
    empty = tmp_path_factory.mktemp("empty-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKER_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ranking.cli", "config", "show", "--json", "--home", str(empty)],
        capture_output=True, text=True, env=env, cwd=empty, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1])["config"])


def config_value(config: dict[str, Any], key: str) -> Any:
    section, name = key.split(".", 1)
    return config[section][name]


def same(quoted: str, value: Any) -> bool:
    """A value as the docs quote it (`semisync`, 0.05, 20, false) equals the config's."""
    text = quoted.strip().strip("`").strip('"')
    if isinstance(value, bool):
        return text == str(value).lower()
    if isinstance(value, int | float):
        try:
            return float(text) == float(value) and (isinstance(value, float) or "." not in text)
        except ValueError:
            return False
    return text == str(value)


def params_table() -> dict[str, list[str]]:
    """`name -> [default, config key, rule]` from the table under "### Params"."""
    text = ORCHESTRATION.read_text()
    section = text.split("### Params", 1)[1]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            if rows:
                break  # the table ended
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_params_table_lists_every_param_with_its_config_key() -> None:
    params = _params_module()
    table = params_table()
    assert set(table) == set(params.retrain_param_schemas()), (
        "docs/orchestration.md Params table vs params.py"
    )
    for name, (_, key, _) in table.items():
        assert key.strip("`") == params.PARAM_KEYS.get(name, NOT_CONFIG), name


def test_the_params_tables_defaults_are_the_shipped_config_and_params_defaults(
    shipped_config: dict[str, Any],
) -> None:
    params = _params_module()
    schemas = params.retrain_param_schemas()
    for name, (default, _key, _) in params_table().items():
        if name in params.PARAM_KEYS:
            match = re.fullmatch(r"empty \(config: (.+)\)", default)
            assert match, f"{name}: default cell {default!r} should read 'empty (config: X)'"
            value = config_value(shipped_config, params.PARAM_KEYS[name])
            assert same(match.group(1), value), (
                f"{name}: the docs say config {match.group(1)}, config show says {value!r}"
            )
        else:
            expected = schemas[name]["default"]
            shown = {None: "none", False: "false", True: "true", "": '""'}.get(expected, str(expected))
            assert default == shown, f"{name}: docs default {default!r}, params.py {expected!r}"


def test_the_params_tables_rules_name_every_allowed_value() -> None:
    schemas = _params_module().retrain_param_schemas()
    for name, (_, _, rule) in params_table().items():
        allowed = [v for v in schemas[name].get("enum", []) if v is not None]
        for value in allowed:
            assert f"`{value}`" in rule, f"{name}: the rule cell does not name `{value}`: {rule}"


def test_the_params_descriptions_quote_the_shipped_defaults(shipped_config: dict[str, Any]) -> None:
    quoted = [
        (name, key, value)
        for name, spec in _params_module().retrain_param_schemas().items()
        for key, value in re.findall(
            r"([a-z_]+\.[a-z_0-9]+) \(default ([^,):\s]+)", spec.get("description", "")
        )
    ]
    assert quoted, "no default quoted in the Params' descriptions: the check would check nothing"
    for name, key, value in quoted:
        actual = config_value(shipped_config, key)
        assert same(value, actual), (
            f"Param {name}'s description says {key} defaults to {value}, it is {actual!r}"
        )


def test_the_annotated_config_in_the_docs_is_the_shipped_default(shipped_config: dict[str, Any]) -> None:
    """docs/backtest.md's TOML block "printed with every default by ranker config show": each key set
    there holds the default, each `# key =` there is unset, and no key is missing."""
    block = BACKTEST.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    documented = tomllib.loads(block)
    unset = {
        (section, key)
        for section, body in re.findall(r"^\[([a-z_]+)\][^\n]*\n(.*?)(?=^\[|\Z)", block, re.M | re.S)
        for key in re.findall(r"^# ([a-z_]+) =", body, re.M)
    }
    for section, values in shipped_config.items():
        for key, value in values.items():
            if isinstance(value, dict) or (value is None and key.endswith("_optimizer")):
                continue  # tables (optimizer settings) are documented by example
            where = f"[{section}] {key}"
            if value is None:
                assert (section, key) in unset, (
                    f"{where}: unset by default; docs/backtest.md shows it set or not at all"
                )
            else:
                assert key in documented.get(section, {}), (
                    f"{where} = {value!r} is missing from docs/backtest.md"
                )
                assert documented[section][key] == value, (
                    f"{where}: docs/backtest.md says {documented[section][key]!r}, config show {value!r}"
                )


# ---- issue 35, deliver 5: the names, flags and counts the docs state ------------------------------

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README = REPO / "README.md"
# `ranker WORD [WORD...]` then its arguments, up to the end of a code span, a pipe, `;`, `&&` or a comment
RANKER_COMMAND = re.compile(r"(?<![\w/-])ranker((?: [a-z][a-z-]*)+)([^`|;&\n#]*)")
FLAG = re.compile(r"(?<![\w-])--(?:\[no-\])?[a-z][a-z0-9-]*")
NUMBER_WORDS = dict(
    enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen"]
    )
)  # fmt: skip


def _subcommands(parser: Any) -> dict[str, Any]:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_flags(text: str, where: str, root: Any) -> list[str]:
    """`ranker CMD ... --flag` in ``text`` where CMD's parser has no such option (`--[no-]x`: either)."""
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in RANKER_COMMAND.finditer(line):
            words = match.group(1).split()
            parser, used, choices = None, [], _subcommands(root)
            for word in words:
                if word not in choices:
                    break
                parser, choices = choices[word], _subcommands(choices[word])
                used.append(word)
            if parser is None:
                continue
            rest = " ".join(words[len(used) :]) + match.group(2)
            options = set(parser._option_string_actions)
            for flag in FLAG.findall(rest):
                if not {flag.replace("[no-]", ""), flag.replace("[no-]", "no-")} & options:
                    found.append(f"{where}:{number}: ranker {' '.join(used)} {flag}")
    return found


def test_every_flag_the_docs_give_a_ranker_command_is_one_it_takes() -> None:
    from ranking.cli.main import build_parser

    root = build_parser()
    bad = [m for doc in DOCS for m in unknown_flags(doc.read_text(), str(doc.relative_to(REPO)), root)]
    assert bad == [], "the docs give ranker commands flags they do not take:\n" + "\n".join(bad)
    # the check itself
    text = "`ranker train --end D --epochs 2 --[no-]history-features --bogus` and ranker models diff --x | grep --y"
    assert unknown_flags(text, "doc.md", root) == [
        "doc.md:1: ranker train --bogus",
        "doc.md:1: ranker models diff --x",
    ]


def _settings_variables() -> set[str]:
    source = (REPO / "dags" / "ranker_dags" / "settings.py").read_text()
    return set(re.findall(r"(?:text|integer)\(\s*\"(RANKER_[A-Z0-9_]+)\"", source))


def test_the_settings_list_names_every_deployment_setting() -> None:
    text = ORCHESTRATION.read_text()
    section = text.split("## Settings (`RANKER_*` environment variables of the Airflow workers)", 1)[1]
    listed = set(re.findall(r"`(RANKER_[A-Z0-9_]+)`", section.split("\n## ", 1)[0].split("— defaults", 1)[0]))
    variables = _settings_variables()
    assert len(variables) >= 19, "settings.py's variables were not found: the check would check nothing"
    assert listed == variables, (
        f"listed but not read: {listed - variables}; read but not listed: {variables - listed}"
    )


def _dag_ids() -> set[str]:
    return {
        dag_id
        for path in (REPO / "dags").glob("*.py")
        for dag_id in re.findall(r"dag_id=\"([a-z_]+)\"", path.read_text())
    }


def test_the_docs_name_every_dag_and_count_them_right() -> None:
    dags = _dag_ids()
    assert len(dags) >= 4
    readme_row = next(line for line in README.read_text().splitlines() if line.startswith("| `dags/` |"))
    architecture_row = next(
        line
        for line in (REPO / "docs" / "architecture.md").read_text().splitlines()
        if line.startswith("| `dags/` |")
    )
    orchestration = ORCHESTRATION.read_text()
    for where, text in (("README.md", readme_row), ("docs/architecture.md", architecture_row)):
        assert set(re.findall(r"`(ranker_[a-z_]+)`", text)) == dags, f"{where}'s dags/ row"
    tree = orchestration.split("```", 2)[1]
    assert set(re.findall(r"DAG (ranker_[a-z_]+)", tree)) == dags, "docs/orchestration.md's dags/ tree"
    count = NUMBER_WORDS[len(dags)]
    assert f"{count} Airflow 3 DAGs" in readme_row, f"README.md should say {count} DAGs"
    assert orchestration.startswith(
        f"# Orchestration: the Airflow DAGs and `make demo`\n\n{count.capitalize()} DAGs"
    )


def test_the_readme_names_every_package_of_ranking() -> None:
    packages = {p.parent.name for p in (REPO / "ranking").glob("*/__init__.py")}
    row = next(line for line in README.read_text().splitlines() if line.startswith("| `ranking/` |"))
    named = set(re.findall(r"`([a-z_]+)`", row))
    assert packages - named == set(), f"README.md's ranking/ row leaves out {sorted(packages - named)}"
    assert named & {p.name for p in (REPO / "ranking").iterdir()} == named - {"ranker"}, (
        "names a package that is gone"
    )


def test_the_config_sections_are_counted_right() -> None:
    text = BACKTEST.read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    sections = re.findall(r"^\[([a-z_]+)\]", block, re.M)
    assert len(sections) >= 10
    said = re.search(r"`\$RANKER_CONFIG`\), (\w+) sections\.", text)
    assert said, "docs/backtest.md no longer says how many sections the config has"
    assert said.group(1) == NUMBER_WORDS[len(sections)], f"{len(sections)} sections: {', '.join(sections)}"


def test_the_readme_exit_codes_are_the_clis() -> None:
    from ranking.core.errors import EXIT_CRASH, RankerError

    text = README.read_text().split("## The CLI", 1)[1]
    table = re.findall(r"^\| (\d+) \|", text.split("<!-- runnable -->", 1)[0], re.M)
    assert [int(c) for c in table] == [0, 1, RankerError.exit_code, EXIT_CRASH, 130]


def test_the_readme_lists_every_environment_the_makefile_installs() -> None:
    makefile = (REPO / "Makefile").read_text()
    venvs = set(re.findall(r"^(?:VENV|AFVENV|MLVENV) := (\S+)$", makefile, re.M))
    locks = set(re.findall(r"^[A-Z]+_LOCK := (requirements/\S+\.lock)$", makefile, re.M))
    assert len(venvs) == 3 and len(locks) == 3, "the Makefile's environments were not found"
    rows = re.findall(r"^\| `(\.venv[\w-]*)` \| `(requirements/[\w.]+)` \|", README.read_text(), re.M)
    assert {env for env, _ in rows} == venvs and {lock for _, lock in rows} == locks
