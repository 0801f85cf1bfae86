"""Launchers of the training step: the same ``ranker train`` command, run where the settings say.

- ``local`` (default): a subprocess of the Airflow worker, ``ranker train ... --nproc N`` (the CLI
  starts torchrun itself when N > 1). Runs in the tests and in ``make demo``.
- ``kubernetes``: a pod of the trainer image with ``nvidia.com/gpu`` limits and the workspace claim
  mounted at /workspace; the summary comes back through the pod's XCom sidecar.
- ``docker``: a container of the trainer image with a GPU device request and the workspace folder
  bind-mounted at /workspace; the summary is the container's last stdout line.

Container launchers run ``sh -c 'ranker "$@" > FILE' ranker ARG...``: arguments reach ranker as
separate argv entries, never through shell parsing, so no parameter value can inject a command.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranker_dags.params import PlanXCom
from ranker_dags.settings import OrchestrationSettings, registry_needs_mount

CONTAINER_HOME = "/workspace"
CONTAINER_REGISTRY = "/registry"
K8S_XCOM_FILE = "/airflow/xcom/return.json"
DOCKER_SUMMARY_FILE = "/tmp/ranker-summary.json"
PLAN_XCOM = "ti.xcom_pull(task_ids='plan')"


def params_arg(plan: PlanXCom) -> str:
    """The run's Params that are set, as ``--params`` JSON."""
    return json.dumps(plan.get("config_params") or {}, sort_keys=True)


def templated_train_args(settings: OrchestrationSettings) -> list[str]:
    """``ranker step train`` for the container launchers, whose command Airflow renders at run
    time: the plan task's XCom is the request and its Params the ``--params``; the train step
    resumes its run folder itself, so a retry continues after the last complete epoch."""
    args = ["step", "train", "--request", "{{ " + PLAN_XCOM + " | tojson }}"]
    args += ["--params", "{{ " + PLAN_XCOM + "['config_params'] | tojson }}"]
    if settings.train_nproc > 1:
        args += ["--nproc", str(settings.train_nproc)]
    return [*args, "--json", "--home", CONTAINER_HOME, "--run-id", "{{ " + PLAN_XCOM + "['run_id'] }}"]


def container_env(settings: OrchestrationSettings) -> dict[str, str]:
    """Environment of the trainer container: the workspace, and the registry where it lives there."""
    env = {"RANKER_HOME": CONTAINER_HOME, "RANKER_ACTOR": "airflow"}
    if registry_needs_mount(settings):
        env["RANKER_REGISTRY"] = CONTAINER_REGISTRY
    elif settings.registry and "://" in settings.registry:
        env["RANKER_REGISTRY"] = settings.registry
    elif settings.registry:  # a folder inside the workspace: the same place under the container's home
        env["RANKER_REGISTRY"] = str(
            Path(CONTAINER_HOME) / Path(settings.registry).relative_to(settings.home)
        )
    return env


def kubernetes_train_operator(settings: OrchestrationSettings, **task_kwargs: Any) -> Any:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from kubernetes.client import models as k8s

    gpus = str(settings.train_gpus)
    claims = [("workspace", settings.k8s_workspace_pvc, CONTAINER_HOME)]
    if registry_needs_mount(settings):
        claims.append(("registry", settings.k8s_registry_pvc, CONTAINER_REGISTRY))
    resources = k8s.V1ResourceRequirements(
        requests={"cpu": "4", "memory": "32Gi"},
        limits={"memory": "64Gi", **({"nvidia.com/gpu": gpus} if settings.train_gpus else {})},
    )
    return KubernetesPodOperator(
        name="ranker-train",
        namespace=settings.k8s_namespace,
        image=settings.trainer_image,
        cmds=["/bin/sh", "-c", f'ranker "$@" > {K8S_XCOM_FILE}', "ranker"],
        arguments=templated_train_args(settings),
        env_vars=container_env(settings),
        container_resources=resources,
        volumes=[
            k8s.V1Volume(
                name=name, persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
            )
            for name, claim, _ in claims
        ],
        volume_mounts=[k8s.V1VolumeMount(name=name, mount_path=path) for name, _, path in claims],
        do_xcom_push=True,
        get_logs=True,
        on_finish_action="delete_succeeded_pod",
        **task_kwargs,
    )


def docker_train_operator(settings: OrchestrationSettings, **task_kwargs: Any) -> Any:
    from airflow.providers.docker.operators.docker import DockerOperator
    from docker.types import DeviceRequest, Mount

    mounts = [_docker_mount(settings.docker_workspace, CONTAINER_HOME, Mount)]
    if registry_needs_mount(settings):
        mounts.append(_docker_mount(settings.docker_registry, CONTAINER_REGISTRY, Mount))
    device_requests = (
        [DeviceRequest(count=settings.train_gpus, capabilities=[["gpu"]])] if settings.train_gpus else []
    )
    return DockerOperator(
        image=settings.trainer_image,
        command=[
            "/bin/sh",
            "-c",
            f'ranker "$@" > {DOCKER_SUMMARY_FILE} && cat {DOCKER_SUMMARY_FILE}',
            "ranker",
            *templated_train_args(settings),
        ],
        docker_url=settings.docker_url,
        device_requests=device_requests,
        mounts=mounts,
        environment=container_env(settings),
        shm_size=8 * 1024**3,  # torch DataLoader / gloo shared memory
        mount_tmp_dir=False,
        auto_remove="success",
        do_xcom_push=True,
        xcom_all=False,
        **task_kwargs,
    )


def _docker_mount(source: str, target: str, mount_type: Any) -> Any:
    """A host folder is bind-mounted; anything else is a named volume (docker compose's)."""
    kind = "bind" if source.startswith("/") else "volume"
    return mount_type(target=target, source=source, type=kind)


def container_train_operator(settings: OrchestrationSettings, **task_kwargs: Any) -> Any:
    factories: dict[str, Callable[..., Any]] = {
        "kubernetes": kubernetes_train_operator,
        "docker": docker_train_operator,
    }
    if settings.launcher not in factories:
        raise ValueError(f"launcher {settings.launcher!r} does not run in a container")
    return factories[settings.launcher](settings, **task_kwargs)
