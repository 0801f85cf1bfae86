"""The models as Airflow Assets. The champion: ``ranker_retrain`` (on promotion) and ``ranker_rollback``
emit events on it, so a serving DAG scheduled on it reloads the model. Event extras carry the
version and the previous champion."""

from __future__ import annotations

from airflow.sdk import Asset

from ranker_dags.json_values import Summary
from ranker_dags.params import PlanXCom

CHAMPION = Asset(name="ranker_champion", uri="ranker://champion", group="model")
# the base model (ranker pretrain, the weekly ranker_pretrain DAG): ranker_retrain is scheduled on it
# too, so a new base is picked up by a retrain right away instead of at the next daily run
BASE = Asset(name="ranker_base", uri="ranker://base", group="model")

# the assets a step of the retrain graph updates, by the name its ``outlet`` gives
OUTLETS = {"champion": CHAMPION}


def outlet_extra(outlet: str, summary: Summary, plan: PlanXCom) -> Summary:
    """The event extra of ``outlet`` after the step that updates it: the version and the one before."""
    if outlet not in OUTLETS:
        raise ValueError(f"no asset {outlet!r}; known: {', '.join(OUTLETS)}")
    return {
        "version": summary.get("version"),
        "previous": summary.get("previous"),
        "window_end": plan["window_end"],
        "run_id": plan["run_id"],
    }
