"""Fixtures: constructed run folders and registry URLs (registry commands); small seeded windows,
a model config and a trained run folder (train and evaluate commands)."""

from registry_fixtures import make_run, registry_url

from tests.trainer.conftest import manifest, model_config, model_config_file, trained, window_home

__all__ = [
    "make_run",
    "manifest",
    "model_config",
    "model_config_file",
    "registry_url",
    "trained",
    "window_home",
]
