"""``ranker gate | promote | reject | rollback | models list|show | run`` — the registry's CLI.

Handlers import pandas, the gate and the registry inside their bodies so ``ranker --help`` stays
fast. The gate's I/O edge (finding the eval day, scoring the champion) lives here; the decision
itself is the pure :func:`ranking.gate.run_gate`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.cli_common import (
    CommandResult,
    add_common,
    fraction_below_one,
    non_negative,
    parse_date,
    positive_int,
    workspace,
)
from ranking.errors import RankerError, RegistryError

if TYPE_CHECKING:
    import pandas as pd

    from ranking.gate import GateConfig, TrainingWindow
    from ranking.registry import Registry
    from ranking.workspace import Workspace

_VERSION_ARG = re.compile(r"^v\d{4,9}$")


def version_arg(value: str) -> str:
    """argparse type for version ids (they reach registry paths)."""
    if not _VERSION_ARG.match(value):
        raise argparse.ArgumentTypeError(f"not a version id (v followed by digits, e.g. v0003): {value!r}")
    return value


def reason_arg(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the reason must not be empty")
    return value.strip()


def add_registry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry",
        default=None,
        metavar="URL",
        help="registry root: a folder or fsspec URL (default: $RANKER_REGISTRY, else <home>/registry)",
    )


# gate options: (option, GateConfig field, argparse type, help)
_GATE_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    ("--tolerance", "tolerance", fraction_below_one, "max relative save HIT@3 drop vs the champion"),
    ("--min-hit", "min_save_hit_at_3", non_negative, "absolute floor on save HIT@3"),
    (
        "--min-lift-over-random",
        "min_lift_over_random",
        non_negative,
        "HIT@3 must beat random ranking by this",
    ),
    ("--max-auc-drop", "max_auc_drop", non_negative, "max AUC drop vs the champion (absolute)"),
    ("--max-ne-rise", "max_ne_rise", non_negative, "max normalized-entropy rise vs the champion"),
    ("--calibration-low", "calibration_low", non_negative, "lowest mean prediction / base rate"),
    ("--calibration-high", "calibration_high", non_negative, "highest mean prediction / base rate"),
    ("--bootstrap-samples", "bootstrap_samples", positive_int, "bootstrap resamples for the CI"),
)
_GATE_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--require-ci", "require_ci", "the CI's lower bound must also clear -tolerance"),
    ("--allow-unfair", "allow_unfair", "compare even if a model was trained on the eval day (recorded)"),
)


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """Gate thresholds (defaults: ranking.gate.GateConfig, rationale in docs/registry.md)."""
    for option, _, kind, text in _GATE_OPTIONS:
        parser.add_argument(option, type=kind, default=None, help=text)
    for option, _, text in _GATE_FLAGS:
        parser.add_argument(option, action="store_true", help=text)


def gate_passthrough(args: argparse.Namespace) -> list[str]:
    """The gate options of ``args`` as command-line words (``ranker run`` hands them to the gate)."""
    words: list[str] = []
    for option, _, _, _ in _GATE_OPTIONS:
        value = getattr(args, _dest(option), None)
        if value is not None:
            words += [option, str(value)]
    words += [option for option, _, _ in _GATE_FLAGS if getattr(args, _dest(option), False)]
    return words


def gate_config(args: argparse.Namespace) -> GateConfig:
    from ranking.gate import GateConfig

    values: dict[str, Any] = {}
    for option, name, _, _ in _GATE_OPTIONS:
        if getattr(args, _dest(option), None) is not None:
            values[name] = getattr(args, _dest(option))
    for option, name, _ in _GATE_FLAGS:
        values[name] = bool(getattr(args, _dest(option), False))
    return GateConfig(**values)


def _registry(args: argparse.Namespace) -> tuple[Workspace, Registry]:
    from ranking.registry import Registry

    ws = workspace(args)
    return ws, Registry.for_workspace(ws, getattr(args, "registry", None))


# --------------------------------------------------------------------------------------------
# gate
# --------------------------------------------------------------------------------------------


def _window(train: dict[str, Any]) -> TrainingWindow | None:
    from ranking.gate import TrainingWindow

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
        from ranking.evaluate import score_checkpoint
    except ImportError as exc:
        raise RankerError(
            f"cannot score a model: ranking.evaluate.score_checkpoint is unavailable ({exc})"
        ) from None
    return score_checkpoint(checkpoint, eval_parquet)


def handle_gate(args: argparse.Namespace) -> CommandResult:
    import io

    import pandas as pd

    from ranking.gate import run_gate
    from ranking.registry import cache_dir, current_actor

    started = time.perf_counter()
    ws, reg = _registry(args)
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


# --------------------------------------------------------------------------------------------
# promote / reject / rollback
# --------------------------------------------------------------------------------------------


def handle_promote(args: argparse.Namespace) -> CommandResult:
    _, reg = _registry(args)
    event, previous = reg.promote(
        args.version, reason=args.reason, force=args.force, run_id=args.run_id, who=args.who
    )
    summary: dict[str, Any] = {
        "version": args.version,
        "previous": previous,
        "reason": args.reason,
        "forced": bool(event and event.forced),
        "noop": event is None,
        "seq": event.seq if event else None,
    }
    if event is None:
        text = f"{args.version} already is the champion; nothing changed"
    else:
        text = f"champion: {previous or '(none)'} -> {args.version}" + (" (forced)" if event.forced else "")
    return CommandResult(summary, text=text)


def handle_reject(args: argparse.Namespace) -> CommandResult:
    _, reg = _registry(args)
    verdict = reg.verdict(args.version) or {}
    failed = list(verdict.get("failed_checks") or [])
    reason = args.reason or ("gate rejected: " + ", ".join(failed) if failed else "rejected")
    reg.record_rejection(args.version, reason, args.run_id, args.who)
    summary = {"version": args.version, "failed_checks": failed, "reason": reason}
    return CommandResult(summary, text=f"recorded rejection of {args.version}: {reason}")


def handle_rollback(args: argparse.Namespace) -> CommandResult:
    _, reg = _registry(args)
    event = reg.rollback(to=args.to, reason=args.reason, run_id=args.run_id, who=args.who)
    summary = {
        "version": event.to_version,
        "previous": event.from_version,
        "reason": event.reason,
        "seq": event.seq,
        "who": event.who,
    }
    return CommandResult(summary, text=f"rolled back champion: {event.from_version} -> {event.to_version}")


# --------------------------------------------------------------------------------------------
# models list | show
# --------------------------------------------------------------------------------------------


def _version_row(reg: Registry, version: str, champion: str | None) -> dict[str, Any]:
    status = reg.status(version, champion)
    row: dict[str, Any] = {"version": version, "status": status}
    if status != "incomplete":
        rec = reg.record(version)
        metrics = ("save_hit_at_3", "auc", "ne", "calibration")
        row.update(
            created_at=rec.created_at,
            run_id=rec.run_id,
            eval={k: rec.eval[k] for k in metrics if k in rec.eval},
            train=rec.train,
        )
    return row


def handle_models_list(args: argparse.Namespace) -> CommandResult:
    _, reg = _registry(args)
    champion = reg.champion()
    rows = [_version_row(reg, v, champion) for v in reg.version_ids()]
    history = [e.to_dict() for e in reg.history()]
    lines = [f"registry {reg.url}  champion: {champion or '(none)'}", "versions:"]
    for r in rows:
        hit = r.get("eval", {}).get("save_hit_at_3")
        window = r.get("train", {})
        lines.append(
            f"  {r['version']}  {r['status']:<13} HIT@3={hit if hit is None else f'{hit:.4f}'}  "
            f"train=[{window.get('train_start', '?')}, {window.get('train_end', '?')})  "
            f"created={r.get('created_at', '-')}  run={r.get('run_id') or '-'}"
        )
    lines.append("history (champion):")
    for e in history:
        forced = " FORCED" if e["forced"] else ""
        lines.append(
            f"  #{e['seq']} {e['when']} {e['action']}{forced}: {e['from'] or '(none)'} -> {e['to']}"
            f"  by {e['who']}  run={e['run_id'] or '-'}  reason: {e['reason']}"
        )
    summary = {"registry": reg.url, "champion": champion, "versions": rows, "history": history}
    return CommandResult(summary, text="\n".join(lines))


def handle_models_show(args: argparse.Namespace) -> CommandResult:
    _, reg = _registry(args)
    champion = reg.champion()
    rec = reg.verify(args.version) if args.verify else reg.record(args.version)
    summary = {
        **rec.to_dict(),
        "status": reg.status(args.version, champion),
        "verdict": reg.verdict(args.version),
        "checksums_verified": bool(args.verify),
        "was_champion": any(e.to_version == args.version for e in reg.history()),
    }
    return CommandResult(summary)


# --------------------------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add gate, promote, reject, rollback, models list|show and run to ``ranker``."""
    p = sub.add_parser("gate", help="judge a candidate version against the champion (exit 0 pass, 1 reject)")
    p.add_argument("--candidate", type=version_arg, required=True, metavar="VERSION")
    p.add_argument("--end", type=parse_date, default=None, help="eval day (default: the candidate's own)")
    add_gate_options(p)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_gate, step="gate")

    p = sub.add_parser("promote", help="make a (blessed) version the champion")
    p.add_argument("version", type=version_arg)
    p.add_argument("--reason", type=reason_arg, required=True)
    p.add_argument("--force", action="store_true", help="promote even without a passing gate verdict")
    p.add_argument("--who", default=None, help="who is promoting (default: $RANKER_ACTOR, else the OS user)")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_promote, step="promote")

    p = sub.add_parser("reject", help="record that a candidate version was rejected")
    p.add_argument("version", type=version_arg)
    p.add_argument("--reason", type=reason_arg, default=None)
    p.add_argument("--who", default=None)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_reject, step="reject")

    p = sub.add_parser("rollback", help="move the champion back (default: to the previous champion)")
    p.add_argument("--to", type=version_arg, default=None, metavar="VERSION")
    p.add_argument("--reason", type=reason_arg, required=True)
    p.add_argument("--who", default=None)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_rollback, step="rollback")

    models = sub.add_parser("models", help="registered model versions").add_subparsers(
        dest="models_command", metavar="SUBCOMMAND"
    )
    p = models.add_parser("list", help="versions, their status and the champion's history")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_models_list, step="models_list")
    p = models.add_parser("show", help="one version's record, checksums and gate verdict")
    p.add_argument("version", type=version_arg)
    p.add_argument("--verify", action="store_true", help="recompute every file's checksum")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_models_show, step="models_show")

    from ranking.pipeline_run import register_run_command

    register_run_command(sub)
