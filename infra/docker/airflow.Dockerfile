# syntax=docker/dockerfile:1
# Airflow 3 image for docker-compose.yml (api-server, scheduler, dag-processor, triggerer).
# Two environments, as on the host: /opt/ranker/.venv-airflow runs Airflow; /opt/ranker/.venv (CPU
# torch) holds the `ranker` CLI that DAG tasks call for the non-training steps. Training runs in the
# trainer image (infra/docker/trainer.Dockerfile) through the DAG's launcher.
# Build from the repository root: docker compose build  (or docker build -f infra/docker/airflow.Dockerfile .)
FROM python:3.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AIRFLOW_HOME=/opt/airflow

RUN apt-get update \
 && apt-get install -y --no-install-recommends curl tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/ranker
COPY requirements/ requirements/

# Airflow from the full lock (no resolver); the lock holds the Postgres metadata-DB drivers
# (Airflow 3 needs both a sync (psycopg2) and an async (asyncpg) driver).
RUN python -m venv .venv-airflow \
 && .venv-airflow/bin/pip install --no-deps -r requirements/airflow.lock

# Project env on CPU torch: the lock pins torch==2.13.0 (PyPI's is the CUDA build); take the CPU
# wheel from PyTorch's index and everything else from the lock, as `make setup` does on CPU hosts.
RUN python -m venv .venv \
 && .venv/bin/pip install --no-deps "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu \
 && grep -v '^torch==' requirements/trainer.lock > /tmp/project.lock \
 && .venv/bin/pip install --no-deps -r /tmp/project.lock

COPY pyproject.toml README.md ./
COPY ranking/ ranking/
COPY features/ features/
COPY dags/ dags/
RUN .venv/bin/pip install --no-deps --no-build-isolation -e .

# the mount points exist with the right owner, so new named volumes are writable by uid 50000
RUN useradd --uid 50000 --gid 0 --create-home airflow \
 && mkdir -p /opt/airflow /opt/airflow/auth /workspace /registry \
 && chown -R 50000:0 /opt/airflow /workspace /registry
USER 50000

ENV PATH=/opt/ranker/.venv-airflow/bin:$PATH \
    RANKER_BIN=/opt/ranker/.venv/bin/ranker \
    RANKER_HOME=/workspace
ENTRYPOINT ["tini", "--", "airflow"]
CMD ["version"]
