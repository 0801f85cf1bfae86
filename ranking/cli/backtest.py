"""``ranker backtest``: replay the daily retrain over past days, once per recipe, and compare
what each recipe would have served (ranking/backtest; docs/backtest.md)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.cli.common import (
    CALENDAR_DAYS,
    CommandResult,
    Text,
    add_common,
    config_type,
    int_in,
    parse_date,
    path_arg,
    progress_printer,
    run_id_arg,
    shown,
    text_arg,
    workers_int,
    workspace,
)
from ranking.core.limits import MAX_NAME_LEN, MAX_PATH_LEN

if TYPE_CHECKING:
    from ranking.backtest.day import DayRecord
    from ranking.gate.checks import GateConfig

RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"


def _recipe_pair(value: str) -> tuple[str, Path]:
    name, sep, file = value.partition("=")
    name = name.strip()
    if not name:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE or a shipped recipe's NAME, got {shown(value)}")
    path = Path(file).expanduser() if sep else RECIPES_DIR / f"{name}.toml"
    return name, path


_recipe_arg = Text(MAX_PATH_LEN, _recipe_pair)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "backtest",
        help="replay the daily retrain over past days per recipe; compare what each would have served",
        description="For each recipe (a pipeline config file holding the sections it changes), replay "
        "`ranker run` day by day in an isolated registry under <home>/backtests/<id>/<recipe>/, sharing "
        "the window partitions; report served and candidate metrics, decisions, staleness and training "
        "time, and each recipe's served metrics relative to the baseline with a paired bootstrap CI. "
        "Finished days are reused when the backtest is re-run.",
    )
    add_common(p)
    p.add_argument("--start", type=parse_date, required=True, help="first eval day (YYYY-MM-DD)")
    # days past the workspace's data are refused by the engine, which names the days it has
    p.add_argument(
        "--days", type=int_in(1, CALENDAR_DAYS), required=True, help="number of consecutive eval days"
    )
    p.add_argument(
        "--recipe",
        type=_recipe_arg,
        action="append",
        required=True,
        metavar="NAME=FILE",
        help=f"a recipe (repeat); NAME alone means {RECIPES_DIR}/NAME.toml",
    )
    p.add_argument(
        "--baseline",
        type=Text(MAX_NAME_LEN),
        default=None,
        help="recipe the others are compared with (default: the first)",
    )
    p.add_argument("--parallel", type=workers_int, default=1, help="recipes replayed at a time (default 1)")
    p.add_argument(
        "--name",
        type=run_id_arg,
        default=None,
        help="backtest id under <home>/backtests (default from-<start>)",
    )
    p.add_argument(
        "--report-dir", type=path_arg, default=None, help="also copy the report here (e.g. docs/backtest)"
    )
    # bound to the config's [backtest] (ranking/cli/config.py): an unset flag takes its value
    p.add_argument(
        "--bootstrap-samples",
        type=config_type("backtest.bootstrap_samples"),
        default=None,
        help="resamples of the paired two-stage bootstrap (days, then each drawn day's requests) behind"
        " every CI of the report: each recipe vs the baseline, its slices, the heuristic (10..100000;"
        " more: steadier CIs, slower)",
    )
    p.add_argument(
        "--ci-level",
        type=config_type("backtest.ci_level"),
        default=None,
        help="two-sided level of the report's CIs, above 0.5 and below 1 (0.9: each bound is a one-sided 95%%"
        " bound)",
    )
    p.add_argument("--seed", type=config_type("backtest.seed"), default=None, help="bootstrap seed")
    p.add_argument(
        "--inject",
        type=text_arg,
        default=None,
        metavar="KIND@DAY,...",
        help="the gate suite: train each day's candidate once, replace it on these days by a bad one"
        " (kinds: shuffled_labels, zeroed_feature, reset_tables, lr_x100, stale_window, nan_scores,"
        " calibration_x3, leakage; 'all' = every kind on 3 days) and replay each --gate on the stored scores",
    )
    p.add_argument(
        "--gate",
        type=Text(MAX_PATH_LEN),
        action="append",
        default=None,
        metavar="NAME[=FILE]",
        help="a gate the suite replays (repeat): 'new' (the default gate), 'old' (the first gate: best of"
        " 5 champions), or NAME=FILE, a config file whose [gate] section sets it (default: old and new)",
    )
    p.set_defaults(handler=_backtest, step="backtest")


def _gates(values: list[str] | None) -> dict[str, GateConfig]:
    from ranking.config.loader import file_values, parse_file
    from ranking.config.model import GateSection
    from ranking.core.errors import RankerError
    from ranking.gate.checks import OLD_GATE, GateConfig

    out: dict[str, GateConfig] = {}
    for value in values or ["old", "new"]:
        name, sep, file = value.partition("=")
        if not sep:
            if name not in ("old", "new"):
                raise RankerError(f"--gate {value!r}: expected old, new or NAME=FILE")
            out[name] = OLD_GATE if name == "old" else GateConfig()
            continue
        path = Path(file).expanduser().resolve()
        if not path.is_file():
            raise RankerError(f"--gate {value!r}: no file at {path}")
        values_ = file_values(path, parse_file(path))
        gate = {k.split(".", 1)[1]: v for k, v in values_.items() if k.startswith("gate.")}
        try:
            out[name] = GateSection.model_validate(gate).gate_config()
        except ValueError as exc:
            raise RankerError(f"--gate {value!r}: {str(exc).splitlines()[0]}") from None
    return out


def _suite(args: argparse.Namespace, ws, spec, bt, started: float) -> CommandResult:  # type: ignore[no-untyped-def]
    from ranking.backtest.inject import parse_injections
    from ranking.backtest.spec import source_days
    from ranking.backtest.suite import (
        GateSuite,
        SuiteSummary,
        checkpoint_scorer,
        suite_recipe_summary,
        write_suite_report,
    )

    span = source_days(ws)
    window_days = max(run.effective.config.window.days for run in bt.runs)
    earliest = span[0] + dt.timedelta(days=window_days) if span else None
    injections = parse_injections(args.inject, spec.eval_days, earliest)
    gates = _gates(args.gate)
    summary = SuiteSummary(backtest_dir=str(bt.folder), recipes={})
    lines = []
    bt.build_windows()  # every day's window and base range, in the backtested workspace, up front
    for run in bt.runs:
        suite = GateSuite(
            ws,
            run,
            spec.eval_days,
            injections,
            gates,
            checkpoint_scorer,
            bt.window_builder,
            on_progress=lambda text: print(f"backtest: {text}", file=sys.stderr, flush=True),
        )
        suite.build()
        result = suite.replay_gates()
        paths = write_suite_report(
            suite.folder / "report",
            spec,
            suite.clean_validation(),
            run.recipe.name,
            result,
            time.perf_counter() - started,
        )
        if args.report_dir:
            args.report_dir.mkdir(parents=True, exist_ok=True)
            for path in paths.values():
                shutil.copy2(path, args.report_dir / Path(path).name)
        summary.recipes[run.recipe.name] = suite_recipe_summary(paths, result)
        lines.append(f"gate suite {run.recipe.name}: {paths['markdown']}")
        for name, r in result.items():
            g = r.regret
            probe = r.probe
            lines.append(
                f"  {name}: regret vs oracle {g.regret_vs_oracle}, staleness median {g.staleness_median_days} d,"
                f" bad candidates promoted {r.bad_promoted}/{len(r.injected)}"
                f" ({r.stopped_by_validation} stopped by the data validation)"
                + (
                    f"; real-improvement probe: {probe.promoted}/{len(probe.days)} promoted on their first day"
                    if probe
                    else ""
                )
            )
    from ranking.backtest.tracking import track_suite
    from ranking.cli.config import effective_config

    track_suite(
        ws,
        effective_config(args),
        summary,
        spec.id,
        [i.strip() for i in args.inject.split(",") if i.strip()],
        started=time.time() - (time.perf_counter() - started),
        code_version=bt.code_version,
    )
    return CommandResult(summary=summary, text="\n".join(lines))


def _backtest(args: argparse.Namespace) -> CommandResult:
    # torch scores the served models in this process; one thread, as `ranker train` defaults to
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from ranking.backtest.compare import report_of
    from ranking.backtest.engine import Backtest, window_builder_for
    from ranking.backtest.replay import CliReplayer
    from ranking.backtest.report import BacktestSummary, Change, write_report
    from ranking.backtest.spec import BacktestSpec, check_days_against_data, read_recipe
    from ranking.cli.config import effective_config
    from ranking.config.loader import file_values, find_config_file
    from ranking.core.code_version import code_version

    started, started_at = time.perf_counter(), time.time()
    ws = workspace(args)
    recipes = tuple(read_recipe(name, path) for name, path in args.recipe)
    spec = BacktestSpec(
        start=args.start,
        days=args.days,
        recipes=recipes,
        baseline=args.baseline or recipes[0].name,
        name=args.name,
        bootstrap_samples=args.bootstrap_samples,
        ci_level=args.ci_level,
        seed=args.seed,
    )
    base_file = find_config_file(ws.root, args.config)
    bt = Backtest(
        ws,
        spec,
        CliReplayer(),
        base_config=file_values(base_file) if base_file else {},
        base_source=f"file:{base_file}" if base_file else None,
        parallel=args.parallel,
        on_progress=progress_printer("backtest", unit="day", label="day"),
        code_version=code_version(),
        # the windows are built on the backtested workspace's Feast store (its config's [features])
        window_builder=window_builder_for(effective_config(args).config.features.store_settings()),
    )
    check_days_against_data(ws, spec.start, spec.days, max(r.effective.config.window.days for r in bt.runs))
    if args.inject is not None:  # an empty --inject is an error (parse_injections), not a plain backtest
        return _suite(args, ws, spec, bt, started)
    records = bt.run()
    report = report_of(bt, records, time.perf_counter() - started)
    paths = write_report(report, bt.folder / "report")
    from ranking.backtest.tracking import track_backtest

    track_backtest(
        ws, effective_config(args), report, spec.id, paths, started=started_at, code_version=bt.code_version
    )
    if args.report_dir:
        args.report_dir.mkdir(parents=True, exist_ok=True)
        for path in paths.values():
            shutil.copy2(path, args.report_dir / Path(path).name)
    summary = BacktestSummary(
        backtest_dir=str(bt.folder),
        report=paths,
        baseline=spec.baseline,
        recipes=report.recipes,
        vs_baseline={name: Change.of(c) for name, c in report.vs_baseline.items()},
        candidates_vs_baseline={name: Change.of(c) for name, c in report.candidates_vs_baseline.items()},
        wall_seconds=report.wall_seconds,
    )
    lines = [f"backtest report: {paths['markdown']}"]
    for name, s in report.recipes.items():
        c = summary.vs_baseline.get(name)
        hit = s.served_mean["save_hit_at_3"]
        line = (
            f"  {name}: served save HIT@3 {'—' if hit is None else f'{hit:.4f}'} over {s.served_days} days, "
            f"{s.promotions} promotions, longest staleness {s.longest_staleness_days} d"
        )
        change, ci = (
            (c.relative_change.get("save_hit_at_3"), c.ci.get("save_hit_at_3")) if c else (None, None)
        )
        if change is not None and ci:
            lo, hi = ci
            line += f"; vs {spec.baseline}: {100 * change:+.2f}% [{100 * lo:+.2f}%, {100 * hi:+.2f}%]"
        lines.append(line)
    failed = failed_days(records)
    if failed:
        # the report covers the days that ran; the command still fails, so a script or CI that
        # reads only the exit code never takes a partial comparison for a complete one
        message = failed_days_message(failed, bt.folder)
        summary.failed_days, summary.error = failed, message
        lines.append(message)  # `ranker` prints the summary's error on stderr, as for any failure
        return CommandResult(summary=summary, exit_code=2, text="\n".join(lines))
    return CommandResult(summary=summary, text="\n".join(lines))


def failed_days(records: Mapping[str, list[DayRecord]]) -> dict[str, list[str]]:
    """Per recipe, the eval days whose `ranker run` failed (exit neither 0 nor 1)."""
    out = {name: [r.day for r in days if r.failed] for name, days in records.items()}
    return {name: days for name, days in out.items() if days}


def failed_days_message(failed: dict[str, list[str]], folder: Path) -> str:
    """One line naming the failed days and where their logs are."""
    listed = "; ".join(f"{name}: {', '.join(days)}" for name, days in failed.items())
    count = sum(len(days) for days in failed.values())
    return (
        f"{count} replayed day(s) failed ({listed}); their logs: {folder}/<recipe>/days/<day>.log;"
        " the report covers the days that ran"
    )
