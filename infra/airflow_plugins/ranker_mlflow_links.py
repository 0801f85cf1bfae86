"""An Airflow plugin: every task of ``ranker_retrain`` links to the MLflow run of its DAG run.

The pipeline logs ONE MLflow run per retrain run (experiment ``ranker-retrain``, tag
``ranker.record_id`` = ``retrain:<ranker run id>``), written near the end of the run. So the link is
a global operator extra link, which the API server computes when the UI asks for a task's links
(airflow/serialization/definitions/baseoperator.py ``get_extra_links``), not a value a task pushed:
it asks MLflow then, and points at

- the run's page, once the run is logged;
- else the experiment's runs filtered by tag ``ranker.run_id`` (the run appears there when logged);
- else (no experiment yet, MLflow unreachable) the MLflow UI's front page.

Settings (the Airflow components' environment; infra/stack/stack.py sets the first):
``RANKER_MLFLOW_TRACKING_URI`` (an http(s) tracking server; anything else: no link) and
``RANKER_MLFLOW_UI_URL`` (the address people open, default the tracking URI).

Loaded through ``AIRFLOW__CORE__PLUGINS_FOLDER`` (this folder); it imports nothing of the project
(the API server's environment has neither ``ranking`` nor the DAGs folder on its path).
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.plugins_manager import AirflowPlugin
from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

log = logging.getLogger(__name__)

LINK_NAME = "MLflow run"
# the DAGs whose runs are MLflow runs: the experiment, the record id prefix (None: the run is
# found by its tag ranker.run_id alone: a review's record id is made from its dates), and what the
# DAG puts before the Airflow run id to make the ranker run id (dags/ranker_dags/one_step_tasks.py)
EXPERIMENTS: dict[str, tuple[str, str | None, str]] = {
    "ranker_retrain": ("ranker-retrain", "retrain", ""),
    "ranker_pretrain": ("ranker-pretrain", "pretrain", "pretrain__"),
    "ranker_recipe_review": ("ranker-review", None, "review__"),
}
TIMEOUT_S = 2.0  # the UI waits for the links: a slow MLflow must not hold the task page
# dags/ranker_dags/params.py ranker_run_id: the Airflow run id in the CLI's safe alphabet (the
# API server cannot import the DAGs folder; tests/stack/test_stack_mlflow.py checks both agree)
_UNSAFE_RUN_ID = re.compile(r"[^A-Za-z0-9_.:+-]")

Lookup = Callable[[str, str, Mapping[str, Any] | None], dict[str, Any]]


def ranker_run_id(airflow_run_id: str) -> str:
    return _UNSAFE_RUN_ID.sub("_", airflow_run_id).strip("_.:+-")[:128]


def mlflow_urls(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(tracking server, UI) base URLs from the environment; None when there is no server to ask."""
    tracking = environ.get("RANKER_MLFLOW_TRACKING_URI", "").strip().rstrip("/")
    if urllib.parse.urlsplit(tracking).scheme not in ("http", "https"):
        return None
    ui = environ.get("RANKER_MLFLOW_UI_URL", "").strip().rstrip("/") or tracking
    return tracking, ui


def http_lookup(method: str, url: str, body: Mapping[str, Any] | None) -> dict[str, Any]:
    """One MLflow REST call; raises OSError (URLError, HTTPError, timeout) or ValueError (bad JSON)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:
        return dict(json.loads(resp.read() or b"{}"))


def tag_filter(key: str, value: str) -> str:
    """An MLflow search filter on a tag whose key has dots (backquoted); the values are run ids,
    whose alphabet has no quote."""
    return f"tags.`{key}` = '{value}'"


def run_link(
    dag_id: str, airflow_run_id: str, environ: Mapping[str, str], lookup: Lookup = http_lookup
) -> str:
    """The MLflow URL for a task of ``dag_id``'s run ``airflow_run_id``; "" when there is none."""
    urls = mlflow_urls(environ)
    if dag_id not in EXPERIMENTS or urls is None:
        return ""
    tracking, ui = urls
    experiment, prefix, run_prefix = EXPERIMENTS[dag_id]
    run_id = ranker_run_id(run_prefix + airflow_run_id)
    api = f"{tracking}/api/2.0/mlflow"
    try:
        query = urllib.parse.urlencode({"experiment_name": experiment})
        found = lookup("GET", f"{api}/experiments/get-by-name?{query}", None)
        experiment_id = str(found["experiment"]["experiment_id"])
        search = {
            "experiment_ids": [experiment_id],
            "filter": (
                tag_filter("ranker.record_id", f"{prefix}:{run_id}")
                if prefix is not None
                else tag_filter("ranker.run_id", run_id)
            ),
            "max_results": 1,
        }
        runs = lookup("POST", f"{api}/runs/search", search).get("runs") or []
    except (OSError, ValueError, KeyError, TypeError) as exc:  # down, no experiment yet, odd answer
        log.info("MLflow link of %s %s: %s", dag_id, airflow_run_id, exc)
        return f"{ui}/"
    if runs:
        return f"{ui}/#/experiments/{experiment_id}/runs/{runs[0]['info']['run_id']}"
    # not logged yet (the run is still going): the experiment's runs of this DAG run
    search_filter = urllib.parse.quote(tag_filter("ranker.run_id", run_id), safe="")
    return f"{ui}/#/experiments/{experiment_id}/runs?searchFilter={search_filter}"


class MlflowRunLink(BaseOperatorLink):
    """The same link on every task of the run (each step belongs to the one MLflow run)."""

    name = LINK_NAME

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return run_link(ti_key.dag_id, ti_key.run_id, os.environ)


class RankerMlflowPlugin(AirflowPlugin):
    name = "ranker_mlflow"
    global_operator_extra_links: list[Any] = [MlflowRunLink()]  # noqa: RUF012 (the base declares it so)
