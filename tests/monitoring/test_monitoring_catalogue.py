"""The metric catalogue follows Prometheus naming and keeps its labels bounded."""

from __future__ import annotations

from ranking.monitoring.catalogue import CATALOGUE


def test_catalogue_follows_prometheus_naming() -> None:
    for name, spec in CATALOGUE.items():
        assert name.startswith("ranker_") and name == spec.name
        assert re_match(r"^[a-z_][a-z0-9_]*$", name)
        assert name.endswith("_total") == (spec.kind == "counter"), name
        # no run or version ids as labels: they would create a new series every day
        assert not {"run_id", "run", "version", "model_version"} & set(spec.labels), name
        assert not re_match(r".*_(ms|milliseconds|minutes|hours|percent)$", name), name
        assert spec.help


def re_match(pattern: str, text: str) -> bool:
    import re

    return re.match(pattern, text) is not None
