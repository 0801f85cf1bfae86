# syntax=docker/dockerfile:1
# Trainer image: CUDA torch 2.13.0 + fbgemm-gpu 1.8.0 + torchrec 1.8.0 (installed --no-deps: its
# metadata asks for fbgemm-gpu 1.9.0) — `make setup DEVICE=cuda`'s recipe, infra/trainer_env.py.
# An air-gapped build: COPY a wheel folder in and add `--torch system --wheels /wheels` on a base
# image that has torch (docs/training.md "GPU machines without network").
# PyPI's torch wheel brings the CUDA runtime (nvidia-* wheels); the host's NVIDIA driver comes in
# through the NVIDIA container toolkit (docker-compose.yml reserves the GPU).
# Run a training: docker compose --profile gpu run --rm trainer ranker train --end 2026-12-01 --json
FROM python:3.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/ranker
COPY requirements/trainer.lock requirements/trainer.lock
COPY infra/trainer_env.py infra/trainer_env.py

RUN python infra/trainer_env.py install --venv .venv --python python

COPY pyproject.toml README.md ./
COPY ranking/ ranking/
COPY features/ features/
RUN .venv/bin/pip install --no-deps --no-build-isolation -e .

# same uid as the Airflow image: both write the shared workspace and registry volumes
RUN useradd --uid 50000 --create-home ranker && mkdir -p /workspace /registry && chown 50000 /workspace /registry
USER 50000
ENV PATH=/opt/ranker/.venv/bin:$PATH \
    RANKER_HOME=/workspace
# no `ranker` entrypoint: launchers (DockerOperator, KubernetesPodOperator) pass full commands
ENTRYPOINT ["tini", "--"]
CMD ["ranker", "--help"]
