"""Typed configuration of the ranker model and of a training run.

``ModelConfig`` is what a checkpoint needs to be rebuilt (it is written beside every run as
``model_config.json`` and inside every checkpoint); ``TrainConfig`` is how one run trains it.
Both round-trip through plain dicts (JSON/YAML) and validate on construction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypedDict, cast

from features.schema import DENSE_FEATURES, HISTORY_FEATURES, SPARSE_FEATURES
from ranking.core.errors import RankerError
from ranking.core.summaries import Phase

TABLE_OPTIMIZERS = ("rowwise_adagrad", "rowwise_adam", "adam")
DENSE_OPTIMIZERS = ("adam", "adagrad", "sgd")
# auto: the pipeline measured faster on the device (resolve_pipeline); docs/training.md "Pipelines"
PIPELINES = ("auto", "sync", "semisync")
REMEDIES = ("none", "meda")  # epoch-start remedies (ranking.trainer.remedies)

# default table sizes: IDs are hashed into these, so unseen IDs still get a row
_DEFAULT_ROWS = {
    "user_id": 200_000,
    "pin_id": 500_000,
    "user_stats__country": 256,
    "pin_stats__category": 512,
}


class TableConfigRecord(TypedDict):
    name: str
    feature: str
    num_embeddings: int
    embedding_dim: int


class OptimizerConfigRecord(TypedDict):
    name: str
    lr: float
    eps: float
    weight_decay: float


class ModelConfigRecord(TypedDict):
    """A ModelConfig as JSON (``model_config.json``, a checkpoint's ``model_config``)."""

    tables: Sequence[TableConfigRecord]
    dense_features: Sequence[str]
    dense_arch: Sequence[int]
    cross_layers: int
    cross_rank: int
    over_arch: Sequence[int]
    table_optimizer: OptimizerConfigRecord
    dense_optimizer: OptimizerConfigRecord


class TrainConfigRecord(TypedDict):
    """A TrainConfig as JSON (a checkpoint's ``train_config``)."""

    schedule: Sequence[Phase]
    schedule_spec: str
    pipeline: str
    batch_size: int
    eval_batch_size: int
    shuffle_buffer_rows: int
    seed: int
    eval_each_epoch: bool
    timing: bool
    remedy: str


class ConfigError(RankerError):
    """A model or training configuration is invalid."""


@dataclass(frozen=True)
class TableConfig:
    """One embedding table: a sparse feature hashed into ``num_embeddings`` rows."""

    name: str
    feature: str
    num_embeddings: int
    embedding_dim: int

    def __post_init__(self) -> None:
        if self.num_embeddings <= 0 or self.embedding_dim <= 0:
            raise ConfigError(f"table {self.name!r}: num_embeddings and embedding_dim must be > 0")
        if not self.name.isidentifier():
            raise ConfigError(f"table name {self.name!r} must be an identifier")


@dataclass(frozen=True)
class OptimizerConfig:
    name: str
    lr: float
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        for name in ("lr", "eps", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"optimizer {self.name!r}: {name} must be a finite number, got {value!r}")
        if not self.lr > 0:
            # lr=0 is not a freeze (fused optimizer state still accumulates): use the F schedule
            raise ConfigError(f"optimizer {self.name!r}: lr must be > 0, got {self.lr}")
        if self.eps <= 0 or self.weight_decay < 0:
            raise ConfigError(f"optimizer {self.name!r}: eps must be > 0 and weight_decay >= 0")


@dataclass(frozen=True)
class ModelConfig:
    """Embedding tables + dense tower + DCNv2 low-rank cross layers + MLP -> one save logit."""

    tables: tuple[TableConfig, ...]
    dense_features: tuple[str, ...] = DENSE_FEATURES
    dense_arch: tuple[int, ...] = (64, 32)
    cross_layers: int = 2
    cross_rank: int = 16
    over_arch: tuple[int, ...] = (64, 32)
    table_optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="rowwise_adagrad", lr=0.05)
    )
    dense_optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(name="adam", lr=1e-3))

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("model needs at least one embedding table")
        names = [t.name for t in self.tables]
        feats = [t.feature for t in self.tables]
        if len(set(names)) != len(names) or len(set(feats)) != len(feats):
            raise ConfigError(f"table names and features must be unique: {names} / {feats}")
        if not self.dense_arch or not self.over_arch or min(*self.dense_arch, *self.over_arch) <= 0:
            raise ConfigError("dense_arch and over_arch need at least one layer, all sizes > 0")
        if self.cross_layers < 0 or self.cross_rank <= 0:
            raise ConfigError("cross_layers must be >= 0 and cross_rank > 0")
        if self.table_optimizer.name not in TABLE_OPTIMIZERS:
            raise ConfigError(
                f"table optimizer {self.table_optimizer.name!r}: choose from {', '.join(TABLE_OPTIMIZERS)}"
            )
        if self.dense_optimizer.name not in DENSE_OPTIMIZERS:
            raise ConfigError(
                f"dense optimizer {self.dense_optimizer.name!r}: choose from {', '.join(DENSE_OPTIMIZERS)}"
            )

    @property
    def sparse_features(self) -> tuple[str, ...]:
        return tuple(t.feature for t in self.tables)

    def to_dict(self) -> ModelConfigRecord:
        return cast(ModelConfigRecord, asdict(self))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:  # a user's JSON/YAML file: checked here
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ConfigError(f"unknown model config keys: {sorted(unknown)}")
        try:
            kw: dict[str, Any] = dict(raw)  # raw's values, each replaced by its type below
            kw["tables"] = tuple(TableConfig(**t) for t in raw["tables"])
            for key in ("dense_features", "dense_arch", "over_arch"):
                if key in kw:
                    kw[key] = tuple(kw[key])
            for key in ("table_optimizer", "dense_optimizer"):
                if key in kw:
                    kw[key] = OptimizerConfig(**kw[key])
            return cls(**kw)
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"invalid model config: {exc}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def default_dense_features(history_features: bool) -> tuple[str, ...]:
    """The default model's dense features: the user and pin views' (``DENSE_FEATURES``), plus the
    user x pin and user x category history (``HISTORY_FEATURES``, issue 34) when asked."""
    return (*DENSE_FEATURES, *HISTORY_FEATURES) if history_features else DENSE_FEATURES


def reads_history(config: ModelConfig) -> bool:
    """Whether a model reads any history column (a custom model file may read some of them)."""
    return any(name in HISTORY_FEATURES for name in config.dense_features)


def default_model_config(
    embedding_dim: int = 16,
    table_rows: dict[str, int] | None = None,
    *,
    history_features: bool = False,
    **overrides: Any,
) -> ModelConfig:
    """One table per ``features.schema.SPARSE_FEATURES`` column, sized by ``table_rows``; the
    dense features of :func:`default_dense_features`."""
    rows = {**_DEFAULT_ROWS, **(table_rows or {})}
    tables = tuple(
        TableConfig(
            name="t_" + feature.replace("__", "_"),
            feature=feature,
            num_embeddings=rows.get(feature, 10_000),
            embedding_dim=embedding_dim,
        )
        for feature in SPARSE_FEATURES
    )
    return replace(
        ModelConfig(tables=tables, dense_features=default_dense_features(history_features)), **overrides
    )


def load_model_config(path: Path) -> ModelConfig:
    """Read a ModelConfig from JSON or YAML."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read model config {path}: {exc.strerror}") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        raw = yaml.safe_load(text)
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"model config {path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"model config {path} must hold a mapping")
    return ModelConfig.from_dict(raw)


@dataclass(frozen=True)
class TrainConfig:
    """How one run trains: schedule (one phase per epoch), batching, pipeline, seed."""

    schedule: tuple[Phase, ...]  # "frozen" | "joint" per epoch (see ranking.trainer.schedule)
    schedule_spec: str = "delayed"
    pipeline: str = "auto"
    batch_size: int = 1024  # global: split across ranks
    eval_batch_size: int = 8192
    shuffle_buffer_rows: int = 100_000
    seed: int = 0
    eval_each_epoch: bool = True
    timing: bool = True
    remedy: str = "none"  # "meda": tables (and their optimizer state) back to the seed's init each epoch

    def __post_init__(self) -> None:
        if self.remedy not in REMEDIES:
            raise ConfigError(f"remedy {self.remedy!r}: choose from {', '.join(REMEDIES)}")
        if not self.schedule:
            raise ConfigError("schedule has no epochs")
        bad = [p for p in self.schedule if p not in ("frozen", "joint")]
        if bad:
            raise ConfigError(f"schedule phases must be frozen|joint, got {bad}")
        if self.pipeline not in PIPELINES:
            raise ConfigError(f"pipeline {self.pipeline!r}: choose from {', '.join(PIPELINES)}")
        if self.batch_size <= 0 or self.eval_batch_size <= 0 or self.shuffle_buffer_rows < 0:
            raise ConfigError("batch sizes must be > 0 and shuffle_buffer_rows >= 0")

    @property
    def epochs(self) -> int:
        return len(self.schedule)

    def to_dict(self) -> TrainConfigRecord:
        return cast(TrainConfigRecord, asdict(self))


def resolve_pipeline(pipeline: str, device_type: str) -> str:
    """The step loop a run uses. ``auto``: semi-sync on CPU (1.00-1.02x sync, docs/training.md),
    sync on CUDA, where semi-sync measured 0.88-0.95x sync on an H200 (issue 21) and no run has
    shown it faster since; benchmarks/gpu.sh measures both, so a GPU run can change this with evidence."""
    if pipeline not in PIPELINES:
        raise ConfigError(f"pipeline {pipeline!r}: choose from {', '.join(PIPELINES)}")
    if pipeline != "auto":
        return pipeline
    return "sync" if device_type == "cuda" else "semisync"
