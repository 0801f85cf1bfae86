"""Prometheus metrics of a pipeline run, built from its step summaries (docs/monitoring.md).

``catalogue`` (every series: name, type, help, labels), ``fields`` (summary field access with clear
errors), ``runs`` (a run's summaries and failure records), ``state`` (what outlives one process,
under a file lock), ``samples`` (summaries + state -> series), ``exposition`` (text format),
``delivery`` (Pushgateway with retries, textfile fallback), ``publish`` (``ranker metrics publish|show``).
"""
