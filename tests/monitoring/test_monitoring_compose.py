"""docker-compose.yml validates (Debian's docker-compose parses it without an engine) and wires the
stack as docs/monitoring.md describes; the Dockerfiles it builds exist and follow the locks."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from monitoring_fixtures import INFRA, REPO, binary

COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKER_COMPOSE = binary("docker-compose")


def compose_config(env: dict[str, str] | None = None) -> dict:
    """The resolved configuration, as docker-compose computes it (anchors, defaults, merges)."""
    if DOCKER_COMPOSE is None:
        pytest.skip(
            "docker-compose not installed (Debian package docker-compose; infra/ci/install-servers.sh)"
        )
    result = subprocess.run(
        [DOCKER_COMPOSE, "-f", str(COMPOSE_FILE), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_file_validates() -> None:
    if DOCKER_COMPOSE is None:
        pytest.skip(
            "docker-compose not installed (Debian package docker-compose; infra/ci/install-servers.sh)"
        )
    result = subprocess.run(
        [DOCKER_COMPOSE, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_a_broken_compose_file_is_rejected(tmp_path) -> None:
    if DOCKER_COMPOSE is None:
        pytest.skip("docker-compose not installed")
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(
        "services:\n  x:\n    image: a\n    depends_on:\n      nope:\n        condition: service_healthy\n"
    )
    result = subprocess.run([DOCKER_COMPOSE, "-f", str(bad), "config", "-q"], capture_output=True, text=True)
    assert result.returncode != 0


def test_the_stack_has_every_service_with_healthchecks() -> None:
    services = compose_config()["services"]
    assert set(services) == {
        "postgres",
        "redis",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "airflow-worker",
        "trainer",
        "pushgateway",
        "prometheus",
        "statsd-exporter",
        "grafana",
        "mlflow",
    }
    for name, service in services.items():
        if name != "airflow-init":  # one-shot: "completed successfully" is its health
            assert "healthcheck" in service, f"{name} has no healthcheck"


def test_airflow_runs_celery_executor_on_redis_and_postgres_and_sends_statsd() -> None:
    services = compose_config()["services"]
    commands = {n: s.get("command") for n, s in services.items() if n.startswith("airflow-")}
    assert commands["airflow-apiserver"] == ["api-server"]
    assert commands["airflow-scheduler"] == ["scheduler"]
    assert commands["airflow-dag-processor"] == ["dag-processor"]
    assert commands["airflow-triggerer"] == ["triggerer"]
    assert commands["airflow-worker"] == ["celery", "worker"]
    for name in commands:
        env = services[name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
        # broker: the stack's Redis, on another db than the Feast online store (db 0)
        assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/1"
        assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql://")
        assert int(env["AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT"]) > 24 * 3600
        assert env["RANKER_PUSHGATEWAY_URL"] == "http://pushgateway:9091"
        # every run in MLflow; the run note through the API server (docs/tracking.md, orchestration.md)
        assert env["RANKER_MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
        api = json.loads(env["AIRFLOW_CONN_RANKER_AIRFLOW_API"])
        assert (api["host"], api["login"]) == ("http://airflow-apiserver:8080", "admin")
        # names read by features/feast_repo.py and dags/ranker_dags/settings.py
        assert (env["RANKER_ONLINE_STORE"], env["RANKER_REDIS_URL"]) == ("redis", "redis:6379")
        assert env["RANKER_REGISTRY"] == "/registry"
        assert env["RANKER_DOCKER_WORKSPACE"] == "ranker-workspace"
        volumes = " ".join(str(v) for v in services[name]["volumes"])
        assert "/workspace" in volumes and "/registry" in volumes
        if name != "airflow-init":
            assert (
                services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
            )


def test_celery_workers_scale_out_and_report_their_health() -> None:
    config = compose_config()
    worker = config["services"]["airflow-worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale airflow-worker=N
    assert "inspect ping" in " ".join(worker["healthcheck"]["test"])
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    # the workers run the tasks: the same workspace, registry and launcher settings as the scheduler
    scheduler = config["services"]["airflow-scheduler"]
    assert worker["volumes"] == scheduler["volumes"]
    assert {k: v for k, v in worker["environment"].items() if k.startswith("RANKER_")} == {
        k: v for k, v in scheduler["environment"].items() if k.startswith("RANKER_")
    }


def test_the_airflow_lock_holds_the_celery_stack() -> None:
    lock = (REPO / "requirements/airflow.lock").read_text()
    for pin in ("apache-airflow-providers-celery==", "celery==", "kombu==", "redis=="):
        assert re.search(rf"^{re.escape(pin)}", lock, re.M), pin
    # provider 3.26.0 imports celery.backends.database.retry, which celery 5.7.0 removed
    assert re.search(r"^celery==5\.6\.", lock, re.M)


def test_trainer_reserves_a_gpu_and_builds_the_cuda_image() -> None:
    config = compose_config()
    trainer = config["services"]["trainer"]
    # the docker launcher mounts these volumes by name into the containers it starts
    assert config["volumes"]["ranker-workspace"]["name"] == "ranker-workspace"
    assert config["volumes"]["ranker-registry"]["name"] == "ranker-registry"
    devices = trainer["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and devices[0]["capabilities"] == ["gpu"]
    assert trainer["build"]["dockerfile"] == "infra/docker/trainer.Dockerfile"


def test_pushgateway_persists_and_prometheus_loads_the_repo_config() -> None:
    services = compose_config()["services"]
    assert any("--persistence.file=/data/" in c for c in services["pushgateway"]["command"])
    assert any("pushgateway-data" in str(v) for v in services["pushgateway"]["volumes"])
    prom_volumes = " ".join(str(v) for v in services["prometheus"]["volumes"])
    assert str(INFRA / "prometheus") in prom_volumes
    grafana_volumes = " ".join(str(v) for v in services["grafana"]["volumes"])
    assert str(INFRA / "grafana/provisioning") in grafana_volumes
    assert str(INFRA / "grafana/dashboards") in grafana_volumes


def test_credentials_are_local_only_defaults_that_the_environment_overrides() -> None:
    text = COMPOSE_FILE.read_text()
    assert "LOCAL DEVELOPMENT CREDENTIALS ONLY" in text
    # every password/secret literal in the file is a ${VAR:-...local-only} default
    keys = re.findall(r"^\s+([A-Z_]*(?:PASSWORD|SECRET)[A-Z_]*):\s*(\S+)", text, re.M)
    assert len(keys) >= 4
    for key, value in keys:
        if key.endswith("_FILE"):  # a path, not a secret
            continue
        assert value.startswith("${") and "local-only" in value, f"{key}: {value}"
    defaults = re.findall(r"\$\{([A-Z_]*(?:PASSWORD|SECRET)[A-Z_]*):-([^}]*)\}", text)
    assert defaults
    for var, default in defaults:
        assert default.endswith("local-only"), f"{var} defaults to {default!r}"
    default = compose_config()["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
    assert default == "admin-local-only"
    overridden = compose_config({"GRAFANA_ADMIN_PASSWORD": "s3cret"})
    assert overridden["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret"
    # published ports listen on localhost only
    for name, service in overridden["services"].items():
        for port in service.get("ports", []):
            published = port if isinstance(port, str) else f"{port.get('host_ip')}:{port.get('published')}"
            assert str(published).startswith("127.0.0.1:"), name


def test_mounted_and_built_paths_exist() -> None:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for name, service in services.items():
        build = service.get("build")
        if build:
            assert (REPO / build["context"] / build["dockerfile"]).is_file(), name
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"


def test_trainer_dockerfile_follows_the_lock_and_the_cuda_recipe() -> None:
    dockerfile = (INFRA / "docker/trainer.Dockerfile").read_text()
    lock = (REPO / "requirements/trainer.lock").read_text()
    assert re.search(r"^fbgemm-gpu-cpu==1\.8\.0$", lock, re.M) and re.search(
        r"^torchrec==1\.8\.0$", lock, re.M
    )
    # the image runs make setup DEVICE=cuda's recipe (tests/smoke/test_trainer_env.py checks that it
    # installs the lock's CUDA torch with fbgemm-gpu at the CPU lock's version, torchrec --no-deps)
    assert "COPY infra/trainer_env.py" in dockerfile
    assert "infra/trainer_env.py install --venv .venv" in dockerfile
    ignore = (INFRA / "docker/trainer.Dockerfile.dockerignore").read_text()
    assert "!infra/trainer_env.py" in ignore.splitlines()
    # launchers pass whole commands (/bin/sh -c ...): no ranker entrypoint
    assert 'ENTRYPOINT ["tini", "--"]' in dockerfile


def test_airflow_dockerfile_installs_both_environments_from_the_locks() -> None:
    dockerfile = (INFRA / "docker/airflow.Dockerfile").read_text()
    assert "--no-deps -r requirements/airflow.lock" in dockerfile
    assert "torch==2.13.0+cpu" in dockerfile and "--no-deps -r /tmp/project.lock" in dockerfile
    for name in ("airflow", "trainer"):
        ignore = (INFRA / f"docker/{name}.Dockerfile.dockerignore").read_text()
        assert ignore.splitlines()[1] == "**"  # context = only what the image copies


def test_images_own_the_volume_mount_points_with_one_uid() -> None:
    # a new named volume takes the owner of the image's folder: both images must create them
    for name in ("airflow", "trainer"):
        dockerfile = (INFRA / f"docker/{name}.Dockerfile").read_text()
        assert "--uid 50000" in dockerfile and "USER 50000" in dockerfile, name
        assert "/workspace" in dockerfile and "/registry" in dockerfile, name


def test_mlflow_serves_the_version_the_client_is_locked_to_on_loopback() -> None:
    services = compose_config()["services"]
    mlflow = services["mlflow"]
    locked = re.search(r"^mlflow==(\S+)$", (REPO / "requirements" / "mlflow.in").read_text(), re.MULTILINE)
    assert locked is not None and mlflow["image"].endswith(f":v{locked.group(1)}")
    client = re.search(
        r"^mlflow-skinny==(\S+)$", (REPO / "requirements" / "trainer.in").read_text(), re.MULTILINE
    )
    assert client is not None and client.group(1) == locked.group(1)  # one store schema
    assert [str(p).split(":")[0] for p in mlflow["ports"]] == ["127.0.0.1"]
    assert "--serve-artifacts" in mlflow["command"] and "healthcheck" in mlflow
    assert services["trainer"]["environment"]["RANKER_MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
