"""Data validation before training (TFX's StatisticsGen + SchemaGen + ExampleValidator, in plain
pyarrow): statistics per window partition, computed once when the partition is built
(``statistics``), a schema kept in the workspace (``data_schema``), anomalies against the schema
and the deployment's own history (``anomalies``, ``reference``), and the one validation step the
DAG, ``ranker run``, the backtest and the review all run (``step``, ``report``). docs/data.md,
"Data validation"."""
