"""Base models built once per review (ranking/review/bases.py): recipes whose base settings match
share one pretrain per day; each gets the same model in its own registry and pays its cost."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ranking.core.hashing import sha256_file
from ranking.registry import Registry
from ranking.review.bases import SharedBases, base_settings

DAY = dt.date(2026, 3, 8)
ON_BASE = '[window]\ndays = 4\n[recipe]\nwarm_start = "base"\nschedule = "{schedule}"\n'


class Pretrainer:
    """What `ranker pretrain` leaves: a registered version made the home's base, and a summary;
    ``fail`` makes every pretrain fail as a crashed one does (exit 2)."""

    def __init__(self, fail: bool = False, wait: threading.Event | None = None) -> None:
        self.fail, self.wait = fail, wait
        self.calls: list[str] = []

    def run_pretrain(
        self, home: Path, day: dt.date, run_id: str, log_path: Path
    ) -> tuple[int, dict[str, Any]]:
        self.calls.append(home.parent.name)
        if self.wait is not None:
            self.wait.wait(timeout=30)
        if self.fail:
            return 2, {"error": "step train failed"}
        run = home / "runs" / run_id
        run.mkdir(parents=True)
        (run / "model.pt").write_bytes(f"weights of {home.parent.name} {day}".encode())
        (run / "model_config.json").write_text("{}")
        window = {"end": "2026-03-04", "days": 4}
        (run / "train_manifest.json").write_text(json.dumps({"window": window}))
        (run / "eval.json").write_text(json.dumps({"save_hit_at_3": 0.3}))
        (run / "eval_scores.parquet").write_bytes(b"scores")
        reg = Registry(str(home / "registry"))
        version = reg.register(run, run_id)
        reg.set_base(version, reason="test pretrain", run_id=run_id)
        return 0, {"version": version, "base_range": ["2026-02-28", "2026-03-04"], "duration_seconds": 42.5}

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, dict[str, Any]]:
        raise AssertionError("not used")

    def score(self, checkpoint: Path, eval_parquet: Path) -> Any:
        raise AssertionError("not used")


def _recipe_home(root: Path, name: str, config: str) -> Path:
    home = root / name / "home"
    home.mkdir(parents=True)
    (home / "ranker.toml").write_text(config)
    return home


def _pretrain(shared: SharedBases, home: Path, day: dt.date = DAY) -> tuple[int, dict[str, Any]]:
    run_id = f"backtest-pretrain__{day.isoformat()}__1"
    return shared.run_pretrain(home, day, run_id, home.parent / "days" / f"{day}-pretrain.log")


def test_recipes_on_the_same_base_pretrain_it_once_and_each_holds_it(tmp_path: Path) -> None:
    inner = Pretrainer()
    shared = SharedBases(inner)
    default = _recipe_home(tmp_path, "default", ON_BASE.format(schedule="F,J"))
    base_j = _recipe_home(tmp_path, "base-j", ON_BASE.format(schedule="joint") + "epochs = 1\n")
    first, second = _pretrain(shared, default), _pretrain(shared, base_j)
    assert inner.calls == ["default"] and shared.pretrained == 1
    assert first[0] == second[0] == 0
    # base-j's own registry holds the same model as its base, named as a copy of default's
    reg = Registry(str(base_j / "registry"))
    assert reg.base() == second[1]["version"]
    source = Registry(str(default / "registry"))
    assert reg.record(reg.base()).files["model.pt"]["sha256"] == sha256_file(
        default / "runs" / "backtest-pretrain__2026-03-08__1" / "model.pt"
    )
    assert source.record(source.base()).files == reg.record(reg.base()).files
    assert "default's pretrain" in reg.history("base")[-1].reason
    # the copy pays the base's measured cost and covers the same range
    assert second[1]["duration_seconds"] == 42.5
    assert second[1]["base_range"] == first[1]["base_range"]
    assert second[1]["shared_from"] == {
        "recipe": "default",
        "run_id": "backtest-pretrain__2026-03-08__1",
        "version": "v0001",
    }
    # another day is another base
    _pretrain(shared, base_j, DAY + dt.timedelta(days=7))
    assert inner.calls == ["default", "base-j"]


@pytest.mark.parametrize(
    "other",
    [
        '[window]\ndays = 5\n[recipe]\nwarm_start = "base"\n',  # another window: another base range
        '[window]\ndays = 4\n[recipe]\nwarm_start = "base"\n[pretrain]\nseed = 3\n',
        '[window]\ndays = 4\n[recipe]\nwarm_start = "base"\nbatch_size = 64\n',  # the base trains with it
    ],
)
def test_a_recipe_whose_base_differs_pretrains_its_own(tmp_path: Path, other: str) -> None:
    inner = Pretrainer()
    shared = SharedBases(inner)
    default = _recipe_home(tmp_path, "default", ON_BASE.format(schedule="F,J"))
    variant = _recipe_home(tmp_path, "variant", other)
    assert base_settings(default) != base_settings(variant)
    _pretrain(shared, default)
    _pretrain(shared, variant)
    assert inner.calls == ["default", "variant"]


def test_a_failed_pretrain_is_not_shared(tmp_path: Path) -> None:
    inner = Pretrainer(fail=True)
    shared = SharedBases(inner)
    homes = [_recipe_home(tmp_path, n, ON_BASE.format(schedule="F,J")) for n in ("default", "base-fj")]
    assert [_pretrain(shared, h)[0] for h in homes] == [2, 2]
    assert inner.calls == ["default", "base-fj"]  # the second tried for itself
    assert Registry(str(homes[1] / "registry")).base() is None


def test_a_recipe_asking_while_the_base_is_pretrained_waits_for_it(tmp_path: Path) -> None:
    release = threading.Event()
    inner = Pretrainer(wait=release)
    shared = SharedBases(inner)
    homes = [
        _recipe_home(tmp_path, n, ON_BASE.format(schedule=s))
        for n, s in (("default", "F,J"), ("base-j", "joint"))
    ]
    results: dict[str, tuple[int, dict[str, Any]]] = {}
    threads = [
        threading.Thread(target=lambda h=h: results.update({h.parent.name: _pretrain(shared, h)}))
        for h in homes
    ]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(timeout=30)
    assert len(inner.calls) == 1 and shared.pretrained == 1
    assert {n: r[0] for n, r in results.items()} == {"default": 0, "base-j": 0}
    assert sum("shared_from" in r[1] for r in results.values()) == 1
