"""Redis as the Feast online store (compose's setting), on a real redis-server started here on a
free port; skipped with a message when the binary is missing (Debian package redis-server)."""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tinyspace import START

from features import sources
from ranking.core.workspace import Workspace

pytestmark = [pytest.mark.slow, pytest.mark.integration]

END = START + dt.timedelta(days=6)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server not installed (apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not start within 10 s")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_materialize_into_redis_and_read_back(
    tiny: dict[str, Any], tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from features import feast_repo
    from features.schema import FEATURE_SERVICE

    monkeypatch.setenv("RANKER_ONLINE_STORE", "redis")
    monkeypatch.setenv("RANKER_REDIS_URL", f"redis://{redis_url}")
    home = tmp_path / "home"
    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    ws = Workspace.resolve(home)
    assert feast_repo.apply(ws).online_store == "redis"
    assert f"connection_string: {redis_url}" in (ws.feast / "feature_store.yaml").read_text()
    summary = feast_repo.materialize(ws)
    assert (summary.mode, summary.online_store) == ("full", "redis")
    snap = sources.read_day(ws, sources.USERS, END + dt.timedelta(days=1)).to_pandas().head(3)
    store = feast_repo.open_store(ws)
    online = store.get_online_features(
        features=store.get_feature_service(FEATURE_SERVICE),
        entity_rows=[{"user_id": int(u), "pin_id": 1} for u in snap["user_id"]],
        full_feature_names=True,
    ).to_dict()
    assert online["user_stats__country"] == snap["country"].tolist()
    assert online["user_stats__saves_28d"] == snap["saves_28d"].tolist()
    # the history views: one keyed by user x pin, one by user x category
    for view, table, key in (
        ("user_pin_stats", sources.USER_PINS, "pin_id"),
        ("user_category_stats", sources.USER_CATEGORIES, "category"),
    ):
        pairs = sources.read_day(ws, table, END + dt.timedelta(days=1)).to_pandas().head(3)
        online = store.get_online_features(
            features=[f"{view}:saves_28d", f"{view}:impressions_7d"],
            entity_rows=[
                {"user_id": int(u), key: k}
                for u, k in zip(pairs["user_id"], pairs[key].tolist(), strict=True)
            ],
            full_feature_names=True,
        ).to_dict()
        assert online[f"{view}__saves_28d"] == pairs["saves_28d"].tolist()
        assert online[f"{view}__impressions_7d"] == pairs["impressions_7d"].tolist()


def test_bad_online_store_settings_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from features.feast_repo import FeatureRepoError, store_config_text

    ws = Workspace.resolve(tmp_path)
    monkeypatch.setenv("RANKER_ONLINE_STORE", "cassandra")
    with pytest.raises(FeatureRepoError, match="sqlite or redis"):
        store_config_text(ws)
    monkeypatch.setenv("RANKER_ONLINE_STORE", "redis")
    monkeypatch.setenv("RANKER_REDIS_URL", "localhost:6379; rm -rf /")
    with pytest.raises(FeatureRepoError, match="RANKER_REDIS_URL"):
        store_config_text(ws)
