"""The text exposition: what is written parses back to exactly the samples, without _created series."""

from __future__ import annotations

import pytest
from monitoring_fixtures import NOW, values, write_contract_run

from ranking.core.workspace import Workspace
from ranking.monitoring.delivery import textfile_path
from ranking.monitoring.exposition import parse_exposition
from ranking.monitoring.publish import publish as publish_run


def test_textfile_is_written_atomically_and_parses_back(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    result = publish_run(ws, "d1", now=NOW)
    assert result.delivery == "textfile"
    text = textfile_path(ws).read_text()
    assert parse_exposition(text) == pytest.approx(values(result))
    assert "_created" not in text  # each CLI call is a new process: creation times would lie
    assert sorted(p.name for p in ws.metrics.iterdir()) == [".state.lock", "ranker.prom", "state.json"]
