"""Deployment settings of the ranker DAGs, read once from the environment at parse time.

Environment variables (all optional):

- ``RANKER_BIN``: the project's ``ranker`` executable (default ``<repo>/.venv/bin/ranker``)
- ``RANKER_HOME``: the workspace folder passed as ``--home`` (default ``<repo>/var``)
- ``RANKER_RETRAIN_CRON``: schedule of ``ranker_retrain`` (default: ``OrchestrationSettings.cron``, daily, UTC)
- ``RANKER_LAUNCHER``: ``local`` (default) | ``kubernetes`` | ``docker`` — how ``train`` runs
- ``RANKER_TRAIN_NPROC``: processes per training job (``ranker train --nproc``; default 1)
- ``RANKER_TRAIN_GPUS``: GPUs requested by the kubernetes/docker launchers (default 1)
- ``RANKER_TRAINER_IMAGE``: trainer image for kubernetes/docker (default ``ranker-trainer:latest``)
- ``RANKER_K8S_NAMESPACE``, ``RANKER_K8S_WORKSPACE_PVC``: pod namespace and the claim holding the workspace
- ``RANKER_DOCKER_URL``: the docker daemon; ``RANKER_DOCKER_WORKSPACE``: the workspace as a host folder
  (absolute path, bind mount) or a named docker volume
- ``RANKER_REGISTRY``: the model registry (read by the ``ranker`` CLI too): unset = ``<home>/registry``;
  an fsspec URL (``s3://...``) is passed to the containers as is; a local folder outside the workspace
  needs ``RANKER_DOCKER_REGISTRY`` (host folder or volume) / ``RANKER_K8S_REGISTRY_PVC`` for them
- ``RANKER_TRAINING_POOL``: Airflow pool of the training task (default ``training``)
- ``RANKER_TASK_RETRIES``: retries of the transient steps (default 2)
- ``RANKER_RETRY_DELAY_S``: the first retry's delay in seconds, doubled per retry (default 60)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCHERS = ("local", "kubernetes", "docker")

# Kubernetes/docker names: lower-case DNS labels; images: a conservative reference alphabet.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z?LW#]+$")
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class SettingsError(ValueError):
    """A deployment setting (environment variable) is invalid; the DAG file fails to import."""


@dataclass(frozen=True)
class OrchestrationSettings:
    ranker_bin: str = str(REPO_ROOT / ".venv" / "bin" / "ranker")
    home: str = str(REPO_ROOT / "var")
    cron: str = "0 3 * * *"
    pretrain_cron: str = "0 1 * * 0"  # weekly, before that day's retrain (pretrain.every_days = 7)
    review_cron: str = "0 5 * * 6"  # weekly recipe review, Saturdays after that day's retrain
    launcher: str = "local"
    train_nproc: int = 1
    train_gpus: int = 1
    trainer_image: str = "ranker-trainer:latest"
    k8s_namespace: str = "ranker"
    k8s_workspace_pvc: str = "ranker-workspace"
    docker_url: str = "unix://var/run/docker.sock"
    docker_workspace: str = "/srv/ranker"
    registry: str = ""
    docker_registry: str = ""
    k8s_registry_pvc: str = ""
    training_pool: str = "training"
    task_retries: int = 2
    retry_delay: timedelta = timedelta(minutes=1)
    max_retry_delay: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        problems = list(_problems(self))
        if problems:
            raise SettingsError("invalid ranker DAG settings: " + "; ".join(problems))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OrchestrationSettings:
        env = os.environ if environ is None else environ
        defaults = cls()

        def text(name: str, default: str) -> str:
            return env.get(name, "").strip() or default

        def integer(name: str, default: int) -> int:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                return int(raw)
            except ValueError:
                raise SettingsError(f"{name} must be an integer, got {raw!r}") from None

        return cls(
            ranker_bin=text("RANKER_BIN", defaults.ranker_bin),
            home=text("RANKER_HOME", defaults.home),
            cron=text("RANKER_RETRAIN_CRON", defaults.cron),
            pretrain_cron=text("RANKER_PRETRAIN_CRON", defaults.pretrain_cron),
            review_cron=text("RANKER_REVIEW_CRON", defaults.review_cron),
            launcher=text("RANKER_LAUNCHER", defaults.launcher),
            train_nproc=integer("RANKER_TRAIN_NPROC", defaults.train_nproc),
            train_gpus=integer("RANKER_TRAIN_GPUS", defaults.train_gpus),
            trainer_image=text("RANKER_TRAINER_IMAGE", defaults.trainer_image),
            k8s_namespace=text("RANKER_K8S_NAMESPACE", defaults.k8s_namespace),
            k8s_workspace_pvc=text("RANKER_K8S_WORKSPACE_PVC", defaults.k8s_workspace_pvc),
            docker_url=text("RANKER_DOCKER_URL", defaults.docker_url),
            docker_workspace=text("RANKER_DOCKER_WORKSPACE", defaults.docker_workspace),
            registry=text("RANKER_REGISTRY", ""),
            docker_registry=text("RANKER_DOCKER_REGISTRY", ""),
            k8s_registry_pvc=text("RANKER_K8S_REGISTRY_PVC", ""),
            training_pool=text("RANKER_TRAINING_POOL", defaults.training_pool),
            task_retries=integer("RANKER_TASK_RETRIES", defaults.task_retries),
            retry_delay=timedelta(
                seconds=integer("RANKER_RETRY_DELAY_S", int(defaults.retry_delay.total_seconds()))
            ),
        )


def _problems(s: OrchestrationSettings) -> list[str]:
    return [
        *_location_problems(s),
        *_registry_problems(s),
        *_cron_problems(s),
        *_range_problems(s),
        *_name_problems(s),
    ]


def _location_problems(s: OrchestrationSettings) -> list[str]:
    problems = []
    if s.launcher not in LAUNCHERS:
        problems.append(f"RANKER_LAUNCHER={s.launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if not Path(s.ranker_bin).is_absolute():
        problems.append(f"RANKER_BIN must be an absolute path, got {s.ranker_bin!r}")
    if not Path(s.home).is_absolute():
        problems.append(f"RANKER_HOME must be an absolute path, got {s.home!r}")
    for name, value in (
        ("RANKER_DOCKER_WORKSPACE", s.docker_workspace),
        ("RANKER_DOCKER_REGISTRY", s.docker_registry),
    ):
        if value and not (Path(value).is_absolute() or _VOLUME_NAME.fullmatch(value)):
            problems.append(f"{name} must be an absolute host path or a docker volume name, got {value!r}")
    return problems


def _registry_problems(s: OrchestrationSettings) -> list[str]:
    problems = []
    if s.registry and "://" not in s.registry and not Path(s.registry).is_absolute():
        problems.append(f"RANKER_REGISTRY must be an fsspec URL or an absolute path, got {s.registry!r}")
    if s.launcher in ("kubernetes", "docker") and registry_needs_mount(s):
        on_k8s = s.launcher == "kubernetes"
        mount = s.k8s_registry_pvc if on_k8s else s.docker_registry
        if not mount:
            problems.append(
                f"RANKER_REGISTRY={s.registry!r} is a local folder outside the workspace: the {s.launcher} "
                "launcher needs " + ("RANKER_K8S_REGISTRY_PVC" if on_k8s else "RANKER_DOCKER_REGISTRY")
            )
    return problems


def _cron_problems(s: OrchestrationSettings) -> list[str]:
    problems = []
    for name, value in (
        ("RANKER_RETRAIN_CRON", s.cron),
        ("RANKER_PRETRAIN_CRON", s.pretrain_cron),
        ("RANKER_REVIEW_CRON", s.review_cron),
    ):
        fields = value.split()
        if len(fields) != 5 or not all(_CRON_FIELD.fullmatch(f) for f in fields):
            problems.append(f"{name} must be a 5-field cron expression, got {value!r}")
    return problems


def _range_problems(s: OrchestrationSettings) -> list[str]:
    problems = []
    if not 1 <= s.train_nproc <= 64:
        problems.append(f"RANKER_TRAIN_NPROC must be in 1..64, got {s.train_nproc}")
    if not 0 <= s.train_gpus <= 64:
        problems.append(f"RANKER_TRAIN_GPUS must be in 0..64, got {s.train_gpus}")
    if not 0 <= s.task_retries <= 10:
        problems.append(f"RANKER_TASK_RETRIES must be in 0..10, got {s.task_retries}")
    if not 1 <= s.retry_delay.total_seconds() <= 3600:
        problems.append(f"RANKER_RETRY_DELAY_S must be in 1..3600, got {s.retry_delay.total_seconds():.0f}")
    return problems


def _name_problems(s: OrchestrationSettings) -> list[str]:
    problems = []
    if not _IMAGE_REF.fullmatch(s.trainer_image):
        problems.append(f"RANKER_TRAINER_IMAGE is not an image reference: {s.trainer_image!r}")
    for name, value in (
        ("RANKER_K8S_NAMESPACE", s.k8s_namespace),
        ("RANKER_K8S_WORKSPACE_PVC", s.k8s_workspace_pvc),
        ("RANKER_K8S_REGISTRY_PVC", s.k8s_registry_pvc or "unset"),
    ):
        if not _DNS_LABEL.fullmatch(value):
            problems.append(f"{name} must be a DNS label (a-z, 0-9, -), got {value!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,256}", s.training_pool):
        problems.append(f"RANKER_TRAINING_POOL must be a simple name, got {s.training_pool!r}")
    return problems


def registry_needs_mount(s: OrchestrationSettings) -> bool:
    """A local registry folder outside the workspace: containers reach it only through a mount."""
    if not s.registry or "://" in s.registry:
        return False
    return not Path(s.registry).is_relative_to(Path(s.home))
