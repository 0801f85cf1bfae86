"""The training launchers. The local one runs in the end-to-end tests; the kubernetes and docker
ones are rendered here the way Airflow renders them at run time (templates over the plan task's
XCom) and checked: command, image, GPU resources, workspace volume. The container command's shell
wrapper is executed for real with a stand-in `ranker` to prove arguments pass through verbatim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk.exceptions import AirflowFailException
from ranker_dags import retrain_tasks
from ranker_dags.launchers import CONTAINER_HOME, DOCKER_SUMMARY_FILE, K8S_XCOM_FILE
from ranker_dags.ranker_cli import StepResult
from ranker_dags.retrain_graph import RETRAIN
from ranker_dags.retrain_tasks import RetrainSteps, _upstream_value
from ranker_dags.settings import OrchestrationSettings
from ranker_retrain import build_retrain_dag

PLAN = {
    "run_id": "scheduled__2026-01-25T03:00:00+00:00",
    "window_end": "2026-01-24",
    "window_days": 20,
    "epochs": 3,
    "schedule": "F,J,J",
    "pipeline": "semisync",
    # what RetrainPlan.to_dict() adds: the Params that are set, by pipeline config key
    "config_params": {
        "window.days": 20,
        "recipe.epochs": 3,
        "recipe.schedule": "F,J,J",
        "recipe.pipeline": "semisync",
    },
}
EXPECTED_ARGS = [
    "step",
    "train",
    "--request",
    json.dumps(PLAN, sort_keys=True),  # Jinja's tojson: the plan task's XCom, keys sorted
    "--params",
    '{"recipe.epochs": 3, "recipe.pipeline": "semisync", "recipe.schedule": "F,J,J", "window.days": 20}',
    "--nproc",
    "2",
    "--json",
    "--home",
    CONTAINER_HOME,
    "--run-id",
    "scheduled__2026-01-25T03:00:00+00:00",
]


@dataclass
class PlanTaskInstance:
    """The slice of a task instance that rendering reads: ids and the plan task's XCom."""

    plan: dict[str, Any]
    dag_id: str = "ranker_retrain"
    task_id: str = "train"
    map_index: int = -1
    try_number: int = 1

    def xcom_pull(self, task_ids: str | None = None, key: str = "return_value", **_: Any) -> Any:
        assert (task_ids, key) == ("plan", "return_value"), (task_ids, key)
        return self.plan


def rendered_train_task(
    settings: OrchestrationSettings, plan: dict[str, Any] = PLAN
) -> tuple[Any, dict[str, Any]]:
    dag = build_retrain_dag(settings)
    task = dag.get_task("train")
    context = {"ti": PlanTaskInstance(plan), "run_id": plan["run_id"], "dag": dag}
    task.render_template_fields(context)
    return task, context


def test_kubernetes_launcher_renders_a_gpu_pod() -> None:
    settings = OrchestrationSettings(
        launcher="kubernetes",
        train_gpus=2,
        train_nproc=2,
        trainer_image="registry.example/ranker-trainer:1.4.0",
        k8s_namespace="ml-training",
        k8s_workspace_pvc="ranker-ws",
    )
    task, context = rendered_train_task(settings)
    assert type(task).__name__ == "KubernetesPodOperator"
    assert task.pool == "training"
    pod = task.build_pod_request_obj(context, dry_run=True)
    assert pod.metadata.namespace == "ml-training"
    trainer = pod.spec.containers[0]
    assert trainer.image == "registry.example/ranker-trainer:1.4.0"
    assert trainer.command == ["/bin/sh", "-c", f'ranker "$@" > {K8S_XCOM_FILE}', "ranker"]
    assert trainer.args == EXPECTED_ARGS
    assert trainer.resources.limits["nvidia.com/gpu"] == "2"
    env = {e.name: e.value for e in trainer.env}
    assert env["RANKER_HOME"] == CONTAINER_HOME
    volumes = {v.name: v for v in pod.spec.volumes}
    assert volumes["workspace"].persistent_volume_claim.claim_name == "ranker-ws"
    assert {(m.name, m.mount_path) for m in trainer.volume_mounts} >= {("workspace", CONTAINER_HOME)}
    # the summary comes back through the XCom sidecar reading /airflow/xcom/return.json
    assert "airflow-xcom-sidecar" in [c.name for c in pod.spec.containers]


def test_kubernetes_launcher_without_gpus_requests_none() -> None:
    task, context = rendered_train_task(OrchestrationSettings(launcher="kubernetes", train_gpus=0))
    trainer = task.build_pod_request_obj(context, dry_run=True).spec.containers[0]
    assert "nvidia.com/gpu" not in (trainer.resources.limits or {})


def test_docker_launcher_renders_a_gpu_container() -> None:
    settings = OrchestrationSettings(
        launcher="docker",
        train_gpus=1,
        train_nproc=2,
        trainer_image="ranker-trainer:dev",
        docker_workspace="/data/ranker",
    )
    task, _ = rendered_train_task(settings)
    assert type(task).__name__ == "DockerOperator"
    assert task.image == "ranker-trainer:dev"
    assert task.command[:4] == [
        "/bin/sh",
        "-c",
        f'ranker "$@" > {DOCKER_SUMMARY_FILE} && cat {DOCKER_SUMMARY_FILE}',
        "ranker",
    ]
    assert task.command[4:] == EXPECTED_ARGS
    (request,) = task.device_requests
    assert request["Count"] == 1
    assert request["Capabilities"] == [["gpu"]]
    (mount,) = task.mounts
    assert (mount["Source"], mount["Target"], mount["Type"]) == ("/data/ranker", CONTAINER_HOME, "bind")
    assert task.do_xcom_push and not task.xcom_all
    assert task.pool == "training"


def test_local_launcher_is_a_python_task_of_the_same_step(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = OrchestrationSettings(launcher="local", train_nproc=2)
    task = build_retrain_dag(settings).get_task("train")
    assert isinstance(task, PythonOperator)  # a @task, whatever its private decorated class is named
    assert task.pool == "training"
    ran: list[list[str]] = []

    def run_ranker(argv: list[str], **_: Any) -> StepResult:
        ran.append(argv)
        return StepResult(0, {"version": "v0007"})

    monkeypatch.setattr(retrain_tasks, "run_ranker", run_ranker)
    summary = RetrainSteps(settings).run_step(RETRAIN["train"], {**PLAN, "actor": "airflow"}, {})
    assert summary == {"version": "v0007"}
    [argv] = ran
    assert argv[1:9] == [*EXPECTED_ARGS[:3], json.dumps({**PLAN, "actor": "airflow"}), *EXPECTED_ARGS[4:8]]
    # Params left empty are not passed: the steps take the pipeline config's values
    RetrainSteps(OrchestrationSettings()).run_step(
        RETRAIN["train"], {**PLAN, "config_params": {}, "actor": "a"}, {}
    )
    assert ran[-1][5:7] == ["--params", "{}"] and "--nproc" not in ran[-1]


def fake_ranker(folder: Path) -> Path:
    """A stand-in `ranker` on PATH: logs to stderr, prints its argv as the JSON summary."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ranker"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "print('a log line', file=sys.stderr)\n"
        "print(json.dumps({'argv': sys.argv[1:], 'version': 'v0007'}))\n"
    )
    script.chmod(0o755)
    return folder


def test_container_command_passes_hostile_values_verbatim(tmp_path: Path) -> None:
    hostile = {**PLAN, "config_params": {"recipe.schedule": "F,J,J; touch PWNED"}, "run_id": "$(touch PWNED)"}
    task, _ = rendered_train_task(OrchestrationSettings(launcher="docker", train_nproc=2), hostile)
    summary_file = tmp_path / "summary.json"
    command = [part.replace(DOCKER_SUMMARY_FILE, str(summary_file)) for part in task.command]
    env = {**os.environ, "PATH": f"{fake_ranker(tmp_path / 'bin')}:{os.environ['PATH']}"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    summary = _upstream_value("train", proc.stdout.splitlines()[-1])  # DockerOperator pushes the last line
    assert summary["argv"] == task.command[4:]
    assert (
        '{"recipe.schedule": "F,J,J; touch PWNED"}' in summary["argv"] and "$(touch PWNED)" in summary["argv"]
    )
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"version": "v1"}, {"version": "v1"}),
        ('{"version": "v1"}', {"version": "v1"}),
        (b'log\n{"version": "v1"}\n', {"version": "v1"}),
    ],
)
def test_a_train_result_is_read_in_every_launchers_shape(value: Any, expected: dict[str, Any]) -> None:
    assert _upstream_value("train", value) == expected


def test_a_train_result_of_nothing_is_refused() -> None:
    with pytest.raises(AirflowFailException, match="no summary"):
        _upstream_value("train", None)


def test_containers_reach_a_registry_volume_outside_the_workspace() -> None:
    """docker compose keeps the registry in its own volume (RANKER_REGISTRY=/registry)."""
    settings = OrchestrationSettings(
        launcher="docker",
        home="/workspace",
        registry="/registry",
        docker_workspace="ranker_ranker-workspace",
        docker_registry="ranker_ranker-registry",
    )
    task, _ = rendered_train_task(settings)
    mounts = {m["Target"]: (m["Source"], m["Type"]) for m in task.mounts}
    assert mounts == {
        CONTAINER_HOME: ("ranker_ranker-workspace", "volume"),
        "/registry": ("ranker_ranker-registry", "volume"),
    }
    assert task.environment["RANKER_REGISTRY"] == "/registry"

    k8s_settings = OrchestrationSettings(
        launcher="kubernetes", registry="/srv/registry", k8s_registry_pvc="ranker-reg"
    )
    task, context = rendered_train_task(k8s_settings)
    pod = task.build_pod_request_obj(context, dry_run=True)
    claims = {
        v.name: v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.persistent_volume_claim
    }
    assert claims == {"workspace": "ranker-workspace", "registry": "ranker-reg"}
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["RANKER_REGISTRY"] == "/registry"


@pytest.mark.parametrize(
    ("registry", "expected"),
    [("", None), ("s3://models/ranker", "s3://models/ranker"), ("/srv/ranker/models", "/workspace/models")],
)
def test_container_registry_location(registry: str, expected: str | None) -> None:
    from ranker_dags.launchers import container_env

    env = container_env(OrchestrationSettings(launcher="docker", home="/srv/ranker", registry=registry))
    assert env.get("RANKER_REGISTRY") == expected


def test_a_local_registry_without_a_mount_is_a_settings_error() -> None:
    from ranker_dags.settings import SettingsError

    with pytest.raises(SettingsError, match="RANKER_DOCKER_REGISTRY"):
        OrchestrationSettings(launcher="docker", registry="/elsewhere/registry")
    with pytest.raises(SettingsError, match="RANKER_K8S_REGISTRY_PVC"):
        OrchestrationSettings(launcher="kubernetes", registry="/elsewhere/registry")
    OrchestrationSettings(
        launcher="local", registry="/elsewhere/registry"
    )  # the local launcher shares the disk
