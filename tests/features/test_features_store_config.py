"""The Feast store named in the pipeline config is the one `ranker features apply` really applies:
a workspace whose ranker.toml says ``offline_store = "spark"`` gets Feast's Spark offline store
(its rendered feature_store.yaml, its registry's sources) without starting Spark, and a later
step whose config names another store is refused until the next apply. (Slow: a real Feast
apply; tests/config/test_config_features.py checks the config's validation and precedence.)"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from tinyspace import START, WINDOW_DAYS

from ranking.cli.main import main

pytestmark = pytest.mark.slow

END = START + dt.timedelta(days=6)


def test_a_workspace_configured_for_spark_applies_feasts_spark_store(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyspark")
    for var in ("RANKER_OFFLINE_STORE", "RANKER_ONLINE_STORE", "RANKER_REDIS_URL", "RANKER_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    (home / "ranker.toml").write_text('[features]\noffline_store = "spark"\n')

    assert main(["features", "apply", "--home", str(home), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offline_store"] == "spark"
    rendered = yaml.safe_load((home / "feast" / "feature_store.yaml").read_text())
    assert rendered["offline_store"]["type"] == "spark"
    assert rendered["offline_store"]["spark_conf"]["spark.master"] == "local[*]"
    assert json.loads((home / "feast" / "applied.json").read_text())["offline_store"] == "spark"

    from feast import FeatureStore
    from feast.infra.offline_stores.contrib.spark_offline_store.spark_source import SparkSource
    from pyspark.sql import SparkSession

    store = FeatureStore(repo_path=str(home / "feast"))
    assert store.config.offline_store.type == "spark"
    views = store.list_feature_views()
    assert views and all(isinstance(fv.batch_source, SparkSource) for fv in views)
    assert SparkSession.getActiveSession() is None  # applying did not start Spark

    # the config now names duckdb (the default): the window refuses the Spark-applied workspace
    (home / "ranker.toml").unlink()
    argv = ["features", "window", "--home", str(home), "--end", END.isoformat(), "--days", str(WINDOW_DAYS)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the Feast store settings changed since the last apply (offline_store in" in err, err
