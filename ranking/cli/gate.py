"""``ranker gate``: judge a candidate version against the champion (exit 0 pass, 1 reject)."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.cli.common import (
    CommandResult,
    add_common,
    parse_date,
)
from ranking.cli.options import add_gate_options, add_registry_option, gate_config, open_registry, version_arg
from ranking.core.errors import RankerError, RegistryError

if TYPE_CHECKING:
    import pandas as pd

    from ranking.core.workspace import Workspace
    from ranking.gate.checks import TrainingWindow


def _window(train: dict[str, Any]) -> TrainingWindow | None:
    from ranking.gate.checks import TrainingWindow

    try:
        return TrainingWindow(
            dt.date.fromisoformat(train["train_start"]), dt.date.fromisoformat(train["train_end"])
        )
    except (KeyError, TypeError, ValueError):
        return None


def find_eval_parquet(ws: Workspace, day: dt.date, feature_version: str | None = None) -> Path:
    """The eval-day partition of a built window whose eval day is ``day``."""
    import json

    found: list[tuple[bool, Path]] = []
    for manifest_path in sorted(ws.windows.glob("*/manifest.json")):
        try:
            manifest = json.loads(manifest_path.read_text())
            ev = manifest["eval"]
            if ev["date"] != day.isoformat():
                continue
            path = Path(ev["path"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if path.is_file():
            found.append((manifest.get("feature_version") == feature_version, path))
    if not found:
        raise RankerError(
            f"no built window has eval day {day} under {ws.windows}: run `ranker features window --end {day}`"
        )
    found.sort(key=lambda t: not t[0])  # same feature definitions first
    return found[0][1]


def _score(checkpoint: Path, eval_parquet: Path) -> pd.DataFrame:
    try:
        from ranking.trainer.scoring import score_checkpoint
    except ImportError as exc:
        raise RankerError(
            f"cannot score a model: ranking.trainer.scoring.score_checkpoint is unavailable ({exc})"
        ) from None
    return score_checkpoint(checkpoint, eval_parquet)


def handle_gate(args: argparse.Namespace) -> CommandResult:
    import io

    import pandas as pd

    from ranking.gate.checks import run_gate
    from ranking.registry.store import cache_dir, current_actor

    started = time.perf_counter()
    ws, reg = open_registry(args)
    config = gate_config(args)
    version = args.candidate
    cand = reg.verify(version)
    cand_window = _window(cand.train)
    own_eval_day = cand_window.end if cand_window else None
    eval_day: dt.date | None = args.end or own_eval_day
    if eval_day is None:
        raise RankerError(f"cannot tell {version}'s eval day from its training manifest: pass --end DATE")

    feature_version = cand.train.get("feature_version")
    if eval_day == own_eval_day:
        cand_scores = pd.read_parquet(io.BytesIO(reg.read_file(version, "eval_scores.parquet")))
    else:
        parquet = find_eval_parquet(ws, eval_day, feature_version)
        cand_scores = _score(reg.local_dir(version, cache_dir(ws)) / "model.pt", parquet)

    champion_version = reg.champion()
    if champion_version == version:
        raise RegistryError(f"{version} already is the champion: nothing to gate")
    champ_scores = None
    champ_window = None
    if champion_version is not None:
        champ = reg.verify(champion_version)
        champ_window = _window(champ.train)
        parquet = find_eval_parquet(ws, eval_day, feature_version)
        champ_scores = _score(reg.local_dir(champion_version, cache_dir(ws)) / "model.pt", parquet)

    report = run_gate(
        cand_scores,
        champ_scores,
        config,
        eval_date=eval_day,
        candidate_window=cand_window,
        champion_window=champ_window,
    )
    body = report.to_dict()
    body["candidate"] = {"version": version, **body["candidate"]}
    if body["champion"] is not None:
        body["champion"] = {"version": champion_version, **body["champion"]}
    verdict = {
        **body,
        "version": version,
        "champion_version": champion_version,
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "run_id": args.run_id,
        "who": current_actor(),
    }
    reg.record_verdict(version, verdict)
    summary = {**body, "duration_seconds": round(time.perf_counter() - started, 3)}
    lines = [
        f"gate {report.decision}: {version} vs {champion_version or 'no champion (first run)'} on {eval_day}"
    ]
    lines += [f"  [{'ok' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in report.checks]
    return CommandResult(summary, exit_code=0 if report.passed else 1, text="\n".join(lines))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``gate`` to ``ranker``."""
    p = sub.add_parser("gate", help="judge a candidate version against the champion (exit 0 pass, 1 reject)")
    p.add_argument("--candidate", type=version_arg, required=True, metavar="VERSION")
    p.add_argument("--end", type=parse_date, default=None, help="eval day (default: the candidate's own)")
    add_gate_options(p)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_gate, step="gate")
