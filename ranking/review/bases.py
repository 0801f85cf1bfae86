"""Base models built once per review: recipes that pretrain the same base share it.

The backtest engine gives every recipe its own registry, so each recipe on the base (``default``,
``base-j``, ...) would run ``ranker pretrain`` for the same day on the same range with the same
settings. ``SharedBases`` wraps the review's replayer: the first recipe that asks for a base for
(day, base settings) pretrains it; every later one registers a copy of that version in its own
registry and moves its ``base`` alias to it (reason and run id name the pretrain it came from).
The copy reports the pretrain's measured seconds, so each recipe still pays the base's cost in
its training time, as it would if it ran alone.

Base settings: the recipe home's effective config without what ``ranker pretrain`` overrides for
the base's training step (schedule, epochs, seed, warm start, incremental, remedy: see
``ranking.pipeline.pretrain.execute_pretrain``) and without ``[metrics]`` (where the recipe's own
metrics go). Anything else that differs (window, pretrain, batch size, model, optimizers) makes
another base.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ranking.backtest.replay import PrintedJson, Replayer
from ranking.config.loader import Layer, file_values, resolve

# [recipe] keys the base's training step sets itself (execute_pretrain's `ranker train` flags)
PRETRAIN_OVERRIDES = (
    "schedule",
    "epochs",
    "seed",
    "warm_start",
    "warm_start_scope",
    "warm_start_optimizer",
    "incremental",
    "full_retrain_every_days",
    "full_retrain_warm_start",
    "remedy",
)


def base_settings(home: Path) -> str:
    """What decides a recipe home's base model, as a canonical JSON string (pure but for the read)."""
    config_file = home / "ranker.toml"
    values = file_values(config_file) if config_file.is_file() else {}
    dumped = resolve([Layer(f"file:{config_file}", values)]).config.model_dump(mode="json")
    dumped.pop("metrics", None)
    dumped["recipe"] = {k: v for k, v in dumped["recipe"].items() if k not in PRETRAIN_OVERRIDES}
    return json.dumps(dumped, sort_keys=True)


class _Pretrained(BaseModel):
    """What a shared base is copied from in ``ranker pretrain``'s printed summary."""

    model_config = ConfigDict(frozen=True)  # its other fields are ignored

    version: str
    base_range: list[str] | None = None
    duration_seconds: float | int | None = None


@dataclass(frozen=True)
class _Made:
    home: Path
    run_id: str
    pretrained: _Pretrained


class SharedBases:
    """A ``Replayer`` whose ``run_pretrain`` pretrains each (day, base settings) once."""

    def __init__(self, inner: Replayer) -> None:
        self.inner = inner
        self.pretrained = 0  # pretrains run (the rest were shared)
        self._guard = threading.Lock()
        self._locks: dict[tuple[dt.date, str], threading.Lock] = {}
        self._made: dict[tuple[dt.date, str], _Made] = {}

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, PrintedJson]:
        return self.inner.run_day(home, day, run_id, log_path)

    def score(self, checkpoint: Path, eval_parquet: Path) -> Any:
        return self.inner.score(checkpoint, eval_parquet)

    def run_pretrain(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, PrintedJson]:
        key = (day, base_settings(home))
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # a recipe asking while another pretrains this base waits for it
            made = self._made.get(key)
            if made is None:
                code, summary = self.inner.run_pretrain(home, day, run_id, log_path)
                with self._guard:
                    self.pretrained += 1
                if code == 0 and summary.get("version"):
                    self._made[key] = _Made(home, run_id, _Pretrained.model_validate(summary))
                return code, summary
            return 0, _share(made, home, run_id, log_path)


def _share(made: _Made, home: Path, run_id: str, log_path: Path) -> PrintedJson:
    from ranking.core.workspace import Workspace
    from ranking.registry import Registry, cache_dir

    source = Registry(str(made.home / "registry"))
    version = made.pretrained.version
    files = source.local_dir(version, cache_dir(Workspace.resolve(made.home)))
    target = Registry(str(home / "registry"))
    copied = target.register(files, run_id)
    origin = f"{made.home.parent.name}'s pretrain {made.run_id} ({version})"
    event, previous = target.set_base(copied, reason=f"shared base: a copy of {origin}", run_id=run_id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(f"no pretrain: the base is a copy of {origin}, registered as {copied}\n")
    return {
        "version": copied,
        "base_range": list(made.pretrained.base_range) if made.pretrained.base_range is not None else None,
        "previous_base": previous if event is not None else None,
        "moved": event is not None,
        # the base's cost is the pretrain's: each recipe on it pays it, as it would alone
        "duration_seconds": made.pretrained.duration_seconds,
        "shared_from": {"recipe": made.home.parent.name, "run_id": made.run_id, "version": version},
    }
