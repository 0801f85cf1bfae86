"""The note a retrain run carries in Airflow's runs list: what the run decided, in one line.

A rejection is not a failure of the pipeline (the gate did its job, the champion keeps serving),
so a rejected run stays a green "success"; its note is what reads as a rejection:
``REJECTED by the gate: ...``, ``PROMOTED v0012 (+1.8 % save HIT@3 vs v0011)``, ``DRY RUN: would
promote ...``, ``STOPPED by data validation: ...``, ``FAILED at train``.

The text is a pure function of the run's task states and its steps' summaries (``run_note``).
It is set on the run through Airflow's REST API (``PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}``
with ``note``): Airflow 3's execution API lets a task read its run's note but not write it. The
API is reached with the Airflow connection ``ranker_airflow_api`` (``set_note``); without it the
note is only logged, and nothing fails for a note.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ranker_dags import decisions
from ranker_dags.json_values import Json, Summary, as_list, as_object
from ranker_dags.params import PlanXCom, override_keys

log = logging.getLogger(__name__)

NOTE_CONNECTION = "ranker_airflow_api"  # the Airflow connection of the REST API the note is set through
NOTE_MAX = 1000  # Airflow's limit (DAGRunPatchBody.note, the dag_run_note column)
_TIMEOUT_S = 15.0
_VALIDATE_TASK = "validate_window"
_SHOWN_ANOMALIES = 3


@dataclass(frozen=True)
class RunFacts:
    """What the note is written from: the run's task states (the noting task's own left out), its
    plan (None: the plan failed) and the summaries of the steps that decide (None: no summary)."""

    states: Mapping[str, str | None]
    plan: PlanXCom | None = None
    gate: Summary | None = None
    decide: Summary | None = None
    promote: Summary | None = None
    validation: Summary | None = None  # the validate step's recorded summary when it stopped the run


def run_note(facts: RunFacts) -> str:
    """The run's note: its outcome first (the runs list cuts long notes), then the per-run
    overrides and the reason they were given."""
    return _clip(" | ".join(p for p in (_outcome(facts), _overrides(facts.plan)) if p))


def _outcome(facts: RunFacts) -> str:
    failed = decisions.root_failure(facts.states)
    if failed == _VALIDATE_TASK and facts.validation and facts.validation.get("verdict") == "fail":
        return "STOPPED by data validation: " + _anomalies(facts.validation)
    if failed is not None:
        return f"FAILED at {failed}"
    decide = facts.decide or {}
    version = decide.get("version") or as_object(as_object(facts.gate).get("candidate")).get("version")
    if facts.states.get("promote") == "success":
        return _promoted(facts.promote or {}, version, facts.gate)
    if facts.states.get("record_rejection") == "success":
        return f"REJECTED by the gate: {_failed(facts.gate)} ({_change(facts.gate)}; champion kept)"
    if facts.states.get("keep_champion") == "success":
        return _kept(decide, version, facts.gate)
    return "NO DECISION (the decision's branch did not run)"


def _promoted(promote: Summary, version: Json, gate: Summary | None) -> str:
    if promote.get("forced"):
        return f"PROMOTED {version} BY FORCE past the gate ({_failed(gate)}): {promote.get('reason')}"
    return f"PROMOTED {version} ({_change(gate)})"


def _kept(decide: Summary, version: Json, gate: Summary | None) -> str:
    """The champion kept: by a dry run (what it would have done), else the decision's reason."""
    if not decide.get("dry_run"):
        return f"KEPT champion {decide.get('champion')}: {decide.get('reason')}"
    if decide.get("decision") == "pass":
        return f"DRY RUN: would promote {version} ({_change(gate)}); champion kept"
    return f"DRY RUN: would reject {version}: {_failed(gate)} ({_change(gate)}); champion kept"


def _change(gate: Summary | None) -> str:
    """save HIT@3 of the candidate vs the champion's, and the relative change."""
    gate = gate or {}
    candidate = as_object(gate.get("candidate"))
    champion = as_object(gate.get("champion"))
    hit = _hit(candidate.get("save_hit_at_3"))
    if not champion:
        return f"save HIT@3 {hit}, first champion: absolute checks only"
    change = gate.get("relative_change")
    relative = f", {float(change) * 100:+.1f} %" if isinstance(change, int | float) else ""
    return f"save HIT@3 {hit} vs champion {champion.get('version')} {_hit(champion.get('save_hit_at_3'))}{relative}"


def _hit(value: Json) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _failed(gate: Summary | None) -> str:
    """The failed checks with their value and threshold (``gate_check_lines``' numbers)."""
    failed = [
        check for check in map(as_object, as_list(as_object(gate).get("checks"))) if not check.get("passed")
    ]
    if not failed:
        names = [str(n) for n in as_list(as_object(gate).get("failed_checks"))]
        return "failed " + (", ".join(names) if names else "(no check named)")
    return "; ".join(
        f"{c.get('name')} {decisions.number(c.get('value'))} (threshold {decisions.number(c.get('threshold'))})"
        for c in failed
    )


def _anomalies(validation: Summary) -> str:
    failing = [a for a in map(as_object, as_list(validation.get("anomalies"))) if a.get("policy") == "fail"]
    shown = [
        " ".join(str(a[k]) for k in ("kind", "feature", "day") if a.get(k))
        for a in failing[:_SHOWN_ANOMALIES]
    ]
    more = f" and {len(failing) - _SHOWN_ANOMALIES} more" if len(failing) > _SHOWN_ANOMALIES else ""
    return (", ".join(shown) or "failing anomalies") + more + f" (report {validation.get('report')})"


def _overrides(plan: PlanXCom | None) -> str:
    """The run's gate and validation overrides and the reason (recorded for whoever reads the run)."""
    if plan is None:
        return ""
    params = plan.get("config_params") or {}
    shown = [f"{key}={_value(value)}" for key, value in sorted(params.items()) if key in override_keys()]
    parts = []
    if plan.get("force_promote"):
        parts.append(f"force_promote - reason: {plan.get('reason')}")
    if shown:
        # the overrides Param's own reason; tolerance or min_hit alone: the run's reason, if any
        reason = plan.get("override_reason") or plan.get("reason")
        parts.append("overrides " + ", ".join(shown) + (f" - reason: {reason}" if reason else ""))
    return " | ".join(parts)


def _value(value: Json) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(value.items())) + "}"
    return decisions.number(value)


def _clip(text: str) -> str:
    return text if len(text) <= NOTE_MAX else text[: NOTE_MAX - 1] + "…"


# -- setting it --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiAccess:
    """Where Airflow's REST API is and how to log in: from the connection ``ranker_airflow_api``
    (host with or without the scheme, port, login and password; or a token in its extra)."""

    base_url: str
    login: str | None = None
    password: str | None = None
    token: str | None = None

    @classmethod
    def from_connection(cls, conn: Any) -> ApiAccess:
        host = str(conn.host or "").rstrip("/")
        if not host:
            raise ValueError(f"connection {NOTE_CONNECTION} has no host")
        if "://" not in host:
            host = f"{conn.schema or 'http'}://{host}"
        if conn.port:
            host = f"{host}:{conn.port}"
        extra = conn.extra_dejson or {}
        return cls(base_url=host, login=conn.login, password=conn.password, token=extra.get("token"))


def api_access() -> ApiAccess | None:
    """The connection's access, or None when it is not defined (the note is then only logged)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return ApiAccess.from_connection(Connection.get(NOTE_CONNECTION))
    except AirflowNotFoundException:
        return None


def patch_note(access: ApiAccess, dag_id: str, run_id: str, note: str, client: Any = None) -> None:
    """``PATCH .../dagRuns/{run_id}?update_mask=note`` (after ``POST /auth/token`` without a token);
    any HTTP error raises (``httpx.HTTPStatusError``)."""
    import httpx

    with httpx.Client(base_url=access.base_url, timeout=_TIMEOUT_S, transport=client) as http:
        token = access.token
        if token is None:
            login = http.post("/auth/token", json={"username": access.login, "password": access.password})
            login.raise_for_status()
            token = str(login.json()["access_token"])
        resp = http.patch(
            f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}",
            params={"update_mask": "note"},
            json={"note": note},
            headers={"Authorization": f"Bearer {token}"},
        )
        resp.raise_for_status()


def set_note(
    dag_id: str,
    run_id: str,
    note: str,
    access: Callable[[], ApiAccess | None] = api_access,
    patch: Callable[[ApiAccess, str, str, str], None] = patch_note,
) -> bool:
    """Log the note and set it on the run; True when it was set. Never raises: a note is for
    people, the run's outcome does not depend on it."""
    log.info("run note: %s", note)
    try:
        found = access()
        if found is None:
            log.warning(
                "the run's note is not set in Airflow: no connection %s (docs/orchestration.md)",
                NOTE_CONNECTION,
            )
            return False
        patch(found, dag_id, run_id, note)
    except Exception as exc:  # a note must never fail the task that sets it
        log.warning("the run's note is not set in Airflow: %s: %s", type(exc).__name__, exc)
        return False
    return True


def recorded_validation(home: str, run_id: str, states: Mapping[str, str | None]) -> Summary | None:
    """The validate step's summary as it recorded it (``<home>/pipeline/<run id>/validate.json``)
    when its task failed: a failed task pushes no XCom, and its summary says why."""
    if states.get(_VALIDATE_TASK) != "failed":
        return None
    path = Path(home) / "pipeline" / run_id / "validate.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None
