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

from collections.abc import Callable
from typing import Any

from ranker_dags.ranker_cli import parse_summary
from ranker_dags.settings import OrchestrationSettings

CONTAINER_HOME = "/workspace"
K8S_XCOM_FILE = "/airflow/xcom/return.json"
DOCKER_SUMMARY_FILE = "/tmp/ranker-summary.json"
PLAN_XCOM = "ti.xcom_pull(task_ids='plan')"


def train_step_args(plan: dict[str, Any], nproc: int) -> list[str]:
    """``ranker train`` arguments for a run plan (shared by every launcher)."""
    args = [
        "train",
        "--end",
        str(plan["window_end"]),
        "--days",
        str(plan["window_days"]),
        "--epochs",
        str(plan["epochs"]),
        "--schedule",
        str(plan["schedule"]),
        "--pipeline",
        str(plan["pipeline"]),
    ]
    if nproc > 1:
        args += ["--nproc", str(nproc)]
    return args


def templated_train_args(settings: OrchestrationSettings) -> list[str]:
    """``train_step_args`` + common options as Jinja templates over the plan task's XCom (for the
    container launchers, whose command is rendered by Airflow at run time)."""
    template_plan = {
        key: "{{ " + PLAN_XCOM + f"['{key}'] }}}}"
        for key in ("window_end", "window_days", "epochs", "schedule", "pipeline")
    }
    return [
        *train_step_args(template_plan, settings.train_nproc),
        "--json",
        "--home",
        CONTAINER_HOME,
        "--run-id",
        "{{ " + PLAN_XCOM + "['run_id'] }}",
    ]


def summary_from_xcom(value: Any) -> dict[str, Any]:
    """The train summary as every launcher returns it: a dict (local, kubernetes) or the JSON line
    (docker)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return parse_summary(value)
    raise ValueError(f"the train task returned no summary (got {type(value).__name__}: {value!r:.200})")


def kubernetes_train_operator(settings: OrchestrationSettings, **task_kwargs: Any) -> Any:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from kubernetes.client import models as k8s

    gpus = str(settings.train_gpus)
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
        env_vars={"RANKER_HOME": CONTAINER_HOME, "RANKER_ACTOR": "airflow"},
        container_resources=resources,
        volumes=[
            k8s.V1Volume(
                name="workspace",
                persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                    claim_name=settings.k8s_workspace_pvc
                ),
            )
        ],
        volume_mounts=[k8s.V1VolumeMount(name="workspace", mount_path=CONTAINER_HOME)],
        do_xcom_push=True,
        get_logs=True,
        on_finish_action="delete_succeeded_pod",
        **task_kwargs,
    )


def docker_train_operator(settings: OrchestrationSettings, **task_kwargs: Any) -> Any:
    from airflow.providers.docker.operators.docker import DockerOperator
    from docker.types import DeviceRequest, Mount

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
        mounts=[Mount(target=CONTAINER_HOME, source=settings.docker_workspace, type="bind")],
        environment={"RANKER_HOME": CONTAINER_HOME, "RANKER_ACTOR": "airflow"},
        shm_size=8 * 1024**3,  # torch DataLoader / gloo shared memory
        mount_tmp_dir=False,
        auto_remove="success",
        do_xcom_push=True,
        xcom_all=False,
        **task_kwargs,
    )


def container_train_operator(settings: OrchestrationSettings, **task_kwargs: Any) -> Any:
    factories: dict[str, Callable[..., Any]] = {
        "kubernetes": kubernetes_train_operator,
        "docker": docker_train_operator,
    }
    if settings.launcher not in factories:
        raise ValueError(f"launcher {settings.launcher!r} does not run in a container")
    return factories[settings.launcher](settings, **task_kwargs)
