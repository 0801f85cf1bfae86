"""``ranker runs list``: the pipeline runs of the workspace (``<home>/pipeline/<run id>/``), one row
each: day, recipe, decision, the candidate's save HIT@3 and the champion after the run."""

from __future__ import annotations

import argparse
from pathlib import Path

from ranking.cli.common import CommandResult, IntIn, add_common, parse_date, workspace
from ranking.pipeline.runs import Recipe, RunRow, RunsListing, list_runs
from ranking.registry.records import escape_text

MAX_LIMIT = 1_000_000


def _recipe_text(recipe: Recipe) -> str:
    if recipe.schedule is None and recipe.warm_start is None:
        return "-"
    history = {True: "on", False: "off", None: "-"}[recipe.history_features]
    named = f" [{Path(recipe.file).name}]" if recipe.file else ""
    return f"{recipe.schedule or '-'} warm={recipe.warm_start or '-'} history={history}{named}"


def _cells(row: RunRow) -> list[str]:
    hit = "-" if row.save_hit_at_3 is None else f"{row.save_hit_at_3:.4f}"
    decision = row.decision + (f" ({row.candidate})" if row.candidate and row.kind == "run" else "")
    if row.kind == "pretrain" and row.candidate:
        decision += f" {row.candidate}"
    return [
        row.run_id,
        row.day.isoformat() if row.day else "-",
        _recipe_text(row.recipe),
        decision,
        hit,
        row.champion or "-",
    ]


def _text(listing: RunsListing) -> str:
    if not listing.runs:
        return f"no runs in {listing.pipeline}" + (f" (of {listing.total})" if listing.total else "")
    header = ["RUN", "DAY", "RECIPE", "DECISION (CANDIDATE)", "HIT@3", "CHAMPION"]
    table = [header, *(_cells(r) for r in listing.runs)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]
    files = sorted({r.recipe.file for r in listing.runs if r.recipe.file})
    lines += [f"recipe file: {f}" for f in files]
    lines += [f"{r.run_id}: {problem}" for r in listing.runs for problem in r.problems]
    if len(listing.runs) < listing.total:
        lines.append(f"({len(listing.runs)} of {listing.total} runs)")
    # recorded text (a run id, an error) cannot print as extra, forged lines
    return "\n".join(escape_text(line) for line in lines)


def handle_runs_list(args: argparse.Namespace) -> CommandResult[RunsListing]:
    listing = list_runs(workspace(args).pipeline, day=args.day, limit=args.limit)
    return CommandResult(listing, text=_text(listing))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``runs`` to ``ranker``."""
    runs = sub.add_parser("runs", help="pipeline runs and what each decided").add_subparsers(
        dest="runs_command", metavar="SUBCOMMAND"
    )
    p = runs.add_parser(
        "list",
        help="one row per run in <home>/pipeline: day, recipe, decision, HIT@3, champion after",
        description=__doc__,
    )
    p.add_argument(
        "--day", type=parse_date, default=None, metavar="YYYY-MM-DD", help="only the runs for this eval day"
    )
    p.add_argument(
        "--limit",
        type=IntIn(1, MAX_LIMIT),
        default=None,
        metavar="N",
        help="only the N newest runs (by day, then run id; default: all)",
    )
    add_common(p)
    p.set_defaults(handler=handle_runs_list, step="runs_list")
