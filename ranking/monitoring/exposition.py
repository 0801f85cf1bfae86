"""The Prometheus text exposition format: rendering samples (what the textfile collector and the
Pushgateway read) and parsing it back (``ranker metrics show --json``, tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from ranking.monitoring.catalogue import CATALOGUE
from ranking.monitoring.samples import Sample


def build_registry(samples: list[Sample]) -> Any:
    """A dedicated CollectorRegistry holding exactly ``samples`` (no process/_created series)."""

    class _Collector:
        def collect(self) -> Iterator[Any]:
            by_name: dict[str, list[Sample]] = {}
            for sample in samples:
                by_name.setdefault(sample.name, []).append(sample)
            for name, group in by_name.items():
                spec = CATALOGUE[name]
                family_cls = CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily
                family = family_cls(name, spec.help, labels=list(spec.labels))
                for sample in group:
                    family.add_metric([v for _, v in sample.labels], sample.value)
                yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return registry


def render(samples: list[Sample]) -> str:
    """Prometheus text exposition format of exactly ``samples``."""
    return generate_latest(build_registry(samples)).decode()


def parse_exposition(text: str) -> dict[str, float]:
    """``{'name{label="v",...}': value}`` of a text exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = Sample(s.name, s.value, tuple(s.labels.items())).key
            out[key] = s.value
    return out
