"""features/repo/ is a standard Feast feature repo: the stock `feast` CLI reads it, the store
config is rendered from its template, the feature version is the hash of its definition files
(an edit rebuilds every partition), and the store settings are read in one place."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from tinyspace import START, WINDOW_DAYS

from features import feast_repo
from features.feast_repo import FeatureRepoError, StoreSettings, render_store_config, store_settings
from ranking.core.workspace import Workspace

END = START + dt.timedelta(days=6)
ROOT = Path(__file__).resolve().parents[2]


def test_the_template_as_feast_reads_it_is_the_default_rendered_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Feast expands ${RANKER_HOME} itself (os.path.expandvars): pointing the stock CLI at the
    template gives the same store as `ranker features apply` renders by default."""
    template = (feast_repo.REPO / "feature_store.yaml").read_text()
    monkeypatch.setenv("RANKER_HOME", str(tmp_path))
    as_feast_reads_it = yaml.safe_load(os.path.expandvars(template))
    rendered = yaml.safe_load(render_store_config(template, tmp_path, StoreSettings()))
    assert rendered == as_feast_reads_it
    assert rendered["registry"]["path"] == str(tmp_path / "feast" / "registry.db")
    assert rendered["offline_store"] == {"type": feast_repo.DAY_RANGE_DUCKDB}
    assert rendered["online_store"] == {"type": "sqlite", "path": str(tmp_path / "feast" / "online_store.db")}


def test_spark_and_redis_blocks_replace_the_defaults(tmp_path: Path) -> None:
    template = (feast_repo.REPO / "feature_store.yaml").read_text()
    settings = StoreSettings(offline_store="spark", online_store="redis", redis_url="redis:6379")
    config = yaml.safe_load(render_store_config(template, tmp_path, settings))
    conf = config["offline_store"]["spark_conf"]
    assert config["offline_store"]["type"] == "spark"
    assert conf["spark.master"] == "local[*]" and conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.ui.enabled"] == "false" and conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert config["online_store"] == {"type": "redis", "connection_string": "redis:6379"}
    assert config["registry"]["path"] == str(tmp_path / "feast" / "registry.db")
    with pytest.raises(FeatureRepoError, match="template is not usable"):
        render_store_config("path: ${NOT_A_KNOWN_VARIABLE}\n", tmp_path, settings)


def test_store_settings_a_given_value_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANKER_OFFLINE_STORE", raising=False)
    monkeypatch.delenv("RANKER_ONLINE_STORE", raising=False)
    assert store_settings() == StoreSettings("duckdb", "sqlite", "localhost:6379")
    monkeypatch.setenv("RANKER_OFFLINE_STORE", " Spark ")
    assert store_settings().offline_store == "spark"
    assert store_settings(offline_store="duckdb").offline_store == "duckdb"
    monkeypatch.setenv("RANKER_OFFLINE_STORE", "bigquery")
    with pytest.raises(
        FeatureRepoError, match="RANKER_OFFLINE_STORE must be duckdb or spark, got 'bigquery'"
    ):
        store_settings()
    assert store_settings(offline_store="spark").offline_store == "spark"


def test_the_store_variables_are_read_in_one_place() -> None:
    read = re.compile(r"(environ|getenv)(\.get)?\W+RANKER_(OFFLINE|ONLINE)_STORE\b")
    readers = {
        str(path.relative_to(ROOT)): len(read.findall(path.read_text()))
        for folder in ("ranking", "features", "dags", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if read.search(path.read_text())
    }
    assert readers == {"features/feast_repo.py": 2}  # in store_settings()


def test_definitions_need_an_absolute_workspace() -> None:
    with pytest.raises(FeatureRepoError, match="RANKER_HOME set to the workspace's absolute path"):
        feast_repo.load_repo(Path("relative/home"))


def test_feature_version_is_the_hash_of_the_definition_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(feast_repo.REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    assert feast_repo.feature_version(repo) == feast_repo.feature_version()
    (repo / "feature_store.yaml").write_text("# the store config is not a feature definition\n")
    assert feast_repo.feature_version(repo) == feast_repo.feature_version()
    with (repo / "definitions.py").open("a") as f:
        f.write("\n# an edit\n")
    assert feast_repo.feature_version(repo) != feast_repo.feature_version()


@pytest.mark.slow
def test_edited_definitions_need_apply_and_rebuild_every_partition(
    private_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from features.window import build_window
    from ranking.core.errors import RankerError

    ws = Workspace.resolve(private_home)
    before = build_window(ws, END, WINDOW_DAYS)
    repo = tmp_path / "repo"
    shutil.copytree(feast_repo.REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    with (repo / "definitions.py").open("a") as f:
        f.write("\n# reviewed 2026-12-02\n")
    monkeypatch.setattr(feast_repo, "REPO", repo)
    with pytest.raises(RankerError, match="changed since the last apply"):
        build_window(ws, END, WINDOW_DAYS)
    assert feast_repo.apply(ws).feature_version == feast_repo.feature_version(repo)
    after = build_window(ws, END, WINDOW_DAYS)
    assert (after["days_built"], after["days_reused"]) == (WINDOW_DAYS + 1, 0)
    assert after["feature_version"] != before["feature_version"]
    for old, new in zip([*before["train"], before["eval"]], [*after["train"], after["eval"]], strict=True):
        assert old["partition_key"] != new["partition_key"]
        pd.testing.assert_frame_equal(pd.read_parquet(old["path"]), pd.read_parquet(new["path"]))


@pytest.mark.slow
def test_apply_again_changes_nothing(private_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A total apply deletes what the repo does not hold: the project must be part of it (as
    `feast apply` adds it), or every second apply deletes the project."""
    ws = Workspace.resolve(private_home)
    capsys.readouterr()
    feast_repo.apply(ws)
    out = capsys.readouterr()
    assert out.out == ""  # Feast's progress goes to stderr
    assert "No changes to registry" in out.err and "Deleted" not in out.err
    assert [p.name for p in feast_repo.open_store(ws).list_projects()] == ["ranker"]


@pytest.mark.slow
def test_other_store_settings_need_apply(private_home: Path) -> None:
    ws = Workspace.resolve(private_home)
    feast_repo.open_store(ws)  # as applied
    with pytest.raises(FeatureRepoError, match=r"changed since the last apply \(offline_store in .*apply"):
        feast_repo.open_store(ws, store_settings(offline_store="spark"))


@pytest.mark.slow
def test_a_reused_window_does_not_import_feast(tiny: dict[str, Any]) -> None:
    code = (
        "import sys, datetime as dt; from features.window import build_window;"
        " from ranking.core.workspace import Workspace;"
        f" m = build_window(Workspace.resolve({tiny['home']!r}), dt.date.fromisoformat({END.isoformat()!r}),"
        f" {WINDOW_DAYS}); print(m['days_reused'], 'feast' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(WINDOW_DAYS + 1), "False"]


@pytest.mark.slow
def test_the_stock_feast_cli_applies_the_repo_to_a_workspace(tiny: dict[str, Any], tmp_path: Path) -> None:
    """`feast -c features/repo -f <home>/feast/feature_store.yaml apply` with RANKER_HOME=<home>:
    Feast's own loader reads the definitions and registers the project's views in the workspace."""
    from feast import FeatureStore

    home = tmp_path / "home"
    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    ws = Workspace.resolve(home)
    config = feast_repo.write_store_config(ws, StoreSettings())
    feast_cli = Path(sys.executable).parent / "feast"
    proc = subprocess.run(
        [str(feast_cli), "-c", str(feast_repo.REPO), "-f", str(config), "apply"],
        capture_output=True,
        text=True,
        env={**os.environ, "RANKER_HOME": str(home)},
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tables = {
        "user_stats": "users",
        "pin_stats": "pins",
        "user_pin_stats": "user_pins",
        "user_category_stats": "user_categories",
    }
    for view in tables:
        assert f"Created feature view {view}" in proc.stdout
    assert "Created entity category" in proc.stdout
    assert "Created feature service ranker_v1" in proc.stdout

    store = FeatureStore(repo_path=str(ws.feast))
    views = {fv.name: fv for fv in store.list_feature_views()}
    assert set(views) == set(tables)
    for view, table in tables.items():
        assert views[view].batch_source.path == str(home / "source" / table / "date=*" / "*.parquet")
    assert views["user_pin_stats"].entities == ["user", "pin"]
    assert views["user_category_stats"].entities == ["user", "category"]
    assert {e.name: e.join_key for e in store.list_entities()} == {
        "user": "user_id",
        "pin": "pin_id",
        "category": "category",
    }
    service = store.get_feature_service("ranker_v1")
    assert [p.name for p in service.feature_view_projections] == list(tables)
    # the stock CLI registered exactly what `ranker features apply` loads for this workspace
    ours = feast_repo.describe_views(feast_repo.load_repo(home))
    assert {v.name: v.fields for v in ours} == {
        name: {f.name: str(f.dtype) for f in fv.features} for name, fv in views.items()
    }
