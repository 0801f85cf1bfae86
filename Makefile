# ranker-retrain — the two commands: `make demo` (the main job) and `make test` (the suite).
# Two environments, as production has two images:
#   .venv          project + trainer + features (torch, fbgemm, torchrec, feast), the `ranker` CLI
#   .venv-airflow  Airflow 3 (+ providers) running dags/, whose tasks call .venv/bin/ranker
# Both are installed from full lock files with --no-deps (no resolver). `make setup` is idempotent:
# a stamp keyed on the lock's content makes a re-run on a complete env a no-op.

SHELL := /bin/bash
PYTHON ?= python3
DEVICE ?= cpu# cpu | cuda (GPU machines: fbgemm-gpu instead of fbgemm-gpu-cpu, PyPI's CUDA torch)
TORCH ?= pypi# DEVICE=cuda: pypi (the lock's torch, CUDA build) | system (the host's torch, kept as it is)
WHEELS ?=# DEVICE=cuda: a local wheel folder to install from without network (make wheels fills one)
TORCH_VERSION ?=# make wheels: the air-gapped host's torch (e.g. 2.11)
PYTHON_VERSION ?=# make wheels: the air-gapped host's Python (e.g. 3.12)
VENV := .venv
AFVENV := .venv-airflow
TRAINER_LOCK := requirements/trainer.lock
AIRFLOW_LOCK := requirements/airflow.lock
TRAINER_STAMP := $(VENV)/.installed-$(DEVICE)-$(shell cat $(TRAINER_LOCK) pyproject.toml | sha256sum | cut -c1-12)
AIRFLOW_STAMP := $(AFVENV)/.installed-$(shell sha256sum < $(AIRFLOW_LOCK) | cut -c1-12)
PYTEST_ARGS ?=
STACK_ARGS ?=# e.g. --ranker-home $(CURDIR)/var/demo (infra/stack/stack.py --help)

.PHONY: setup setup-trainer wheels servers test lint typecheck test-py test-airflow test-stack stack stack-down stack-status demo bench study backtest lock lock-check clean-venvs help schema

help:
	@echo "make demo   - set up, build a synthetic workspace, run ranker_retrain through Airflow for two days"
	@echo "make test   - set up, install the test servers (root + apt), lint, type check, pytest in both environments"
	@echo "make stack  - Postgres + Airflow (api-server, scheduler, dag-processor, triggerer) + Prometheus, on 127.0.0.1"
	@echo "make stack-down | make stack-status"
	@echo "make setup [DEVICE=cuda] | make bench | make study | make backtest | make lock"
	@echo "make schema - write the step summaries' JSON Schema and docs/architecture.md's Step summaries from ranking/core/summaries.py"

setup: $(TRAINER_STAMP) $(AIRFLOW_STAMP)

# the trainer environment alone (benchmarks/gpu.sh on a GPU machine needs no Airflow)
setup-trainer: $(TRAINER_STAMP)

$(TRAINER_STAMP):
	@echo ">> installing $(VENV) from $(TRAINER_LOCK) (DEVICE=$(DEVICE))"
	rm -f $(VENV)/.installed-*
ifeq ($(DEVICE),cuda)
	# torch, fbgemm-gpu and torchrec chosen together (infra/trainer_env.py PAIRS); TORCH=system keeps
	# the host's torch, WHEELS=DIR installs from a local folder (air-gapped; docs/training.md)
	$(PYTHON) infra/trainer_env.py install --venv $(VENV) --torch $(TORCH) --python $(PYTHON) $(if $(WHEELS),--wheels $(WHEELS))
else
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --no-deps -r $(TRAINER_LOCK)
endif
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $@

$(AIRFLOW_STAMP):
	@echo ">> installing $(AFVENV) from $(AIRFLOW_LOCK)"
	rm -f $(AFVENV)/.installed-*
	test -x $(AFVENV)/bin/python || $(PYTHON) -m venv $(AFVENV)
	$(AFVENV)/bin/pip install -q --no-deps -r $(AIRFLOW_LOCK)
	touch $@

# The servers the integration tests start (Debian packages): installed where root and apt-get are
# there (the same script as CI), else one message naming what is missing, and no test runs.
servers:
	@infra/ci/install-servers.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# ranking, features, benchmarks against .venv; dags/ against .venv-airflow (the DAG modules import
# airflow, which only that environment has), with the same [tool.mypy] settings and a cache of its own
typecheck: setup
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --python-executable $(AFVENV)/bin/python --cache-dir .mypy_cache/dags dags

# the step summaries' JSON Schema (docs/schemas/step-summaries.schema.json) and the "Step summaries"
# section of docs/architecture.md, generated from ranking/core/summaries.py (tests/core/test_summaries.py
# fails when either is stale); and the config's bounds the DAGs' Params read
# (dags/ranker_dags/config_bounds.json, from ranking/config/model.py; tests/config/test_config_bounds.py)
schema: setup-trainer
	$(VENV)/bin/python -m ranking.core.summaries
	$(VENV)/bin/python -m ranking.config.bounds

# A skip for a reason not on tests/conftest.py's ALLOWED_SKIPS (no GPU, no Docker engine, needs root)
# fails the session under RANKER_STRICT_SKIPS=1.
test-py test-airflow test-stack: export RANKER_STRICT_SKIPS = 1

test-py: setup servers
	$(VENV)/bin/python -m pytest tests --ignore=tests/dags --ignore=tests/stack $(PYTEST_ARGS)

test-airflow: setup
	$(AFVENV)/bin/python -m pytest tests/dags $(PYTEST_ARGS)

# the real stack (infra/stack/stack.py) started by the tests in a folder of their own, on free ports
test-stack: setup servers
	$(AFVENV)/bin/python -m pytest tests/stack $(PYTEST_ARGS)

test: servers lint typecheck test-py test-airflow test-stack

# The local stack: docs/orchestration.md, "The local stack". State, logs and data in var/stack.
stack: setup servers
	$(AFVENV)/bin/python infra/stack/stack.py up $(STACK_ARGS)

stack-down:
	$(AFVENV)/bin/python infra/stack/stack.py down

stack-status:
	$(AFVENV)/bin/python infra/stack/stack.py status

demo: setup
	bash infra/demo.sh

bench: setup
	$(VENV)/bin/python -m benchmarks

study: setup
	bash infra/study.sh

backtest: setup
	bash infra/backtest.sh

lock:
	requirements/compile.sh all

# the committed locks are what `make lock` writes, byte for byte (resolved into a temporary folder,
# constrained by the committed locks; a package index is needed: CI runs it)
lock-check:
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	LOCK_DIR=$$out requirements/compile.sh all >"$$out/log" 2>&1 || { tail -20 "$$out/log"; echo "make lock failed" >&2; exit 1; }; \
	for f in trainer airflow; do \
	  diff -u requirements/$$f.lock "$$out/$$f.lock" || { echo "requirements/$$f.lock is not what make lock writes: run make lock (UPGRADE_PACKAGES=... to move a pin)" >&2; exit 1; }; \
	done; echo "locks reproduce byte for byte"

# on a machine with PyPI: the wheels an air-gapped CUDA host needs (then: make setup DEVICE=cuda
# TORCH=system WHEELS=DIR there)
wheels:
	@test -n "$(WHEELS)" -a -n "$(TORCH_VERSION)" -a -n "$(PYTHON_VERSION)" || { echo "make wheels WHEELS=DIR TORCH_VERSION=X.Y PYTHON_VERSION=3.Z" >&2; exit 2; }
	$(PYTHON) infra/trainer_env.py download --wheels $(WHEELS) --torch-version $(TORCH_VERSION) --python-version $(PYTHON_VERSION)

clean-venvs:
	rm -rf $(VENV) $(AFVENV)
