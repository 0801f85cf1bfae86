"""The pipeline config: one typed file (TOML, or YAML) read by every step; see docs/backtest.md."""

from ranking.config.loader import (
    CONFIG_ENV,
    ConfigFileError,
    EffectiveConfig,
    Layer,
    file_values,
    find_config_file,
    load,
    resolve,
)
from ranking.config.model import PipelineConfig, flatten, leaf_keys

__all__ = [
    "CONFIG_ENV",
    "ConfigFileError",
    "EffectiveConfig",
    "Layer",
    "PipelineConfig",
    "file_values",
    "find_config_file",
    "flatten",
    "leaf_keys",
    "load",
    "resolve",
]
