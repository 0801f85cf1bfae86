"""Registry fixtures: constructed training run folders and registry URLs."""

from registry_fixtures import make_run, registry_url

__all__ = ["make_run", "registry_url"]
