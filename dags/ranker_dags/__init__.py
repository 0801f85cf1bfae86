"""Helpers of the ranker DAGs (``ranker_retrain``, ``ranker_rollback``).

Pure functions and thin wrappers only: they run in the Airflow environment, which cannot import the
project (``ranking``, ``features``, torch, feast). Every pipeline step is a ``ranker`` CLI call in the
project environment. The DAG processor skips this folder (see ``dags/.airflowignore``).
"""
