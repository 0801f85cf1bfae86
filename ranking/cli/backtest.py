"""``ranker backtest``: replay the daily retrain over past days, once per recipe, and compare
what each recipe would have served (ranking/backtest; docs/backtest.md)."""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from ranking.cli.common import (
    CommandResult,
    add_common,
    float_in,
    parse_date,
    positive_int,
    progress_printer,
    workspace,
)

RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"


def _recipe_arg(value: str) -> tuple[str, Path]:
    name, sep, file = value.partition("=")
    name = name.strip()
    if not name:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE or a shipped recipe's NAME, got {value!r}")
    path = Path(file).expanduser() if sep else RECIPES_DIR / f"{name}.toml"
    return name, path


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
    p.add_argument("--days", type=positive_int, required=True, help="number of consecutive eval days")
    p.add_argument(
        "--recipe",
        type=_recipe_arg,
        action="append",
        required=True,
        metavar="NAME=FILE",
        help=f"a recipe (repeat); NAME alone means {RECIPES_DIR}/NAME.toml",
    )
    p.add_argument(
        "--baseline", default=None, help="recipe the others are compared with (default: the first)"
    )
    p.add_argument("--parallel", type=positive_int, default=1, help="recipes replayed at a time (default 1)")
    p.add_argument("--name", default=None, help="backtest id under <home>/backtests (default from-<start>)")
    p.add_argument(
        "--report-dir", type=Path, default=None, help="also copy the report here (e.g. docs/backtest)"
    )
    p.add_argument("--bootstrap-samples", type=positive_int, default=1000)
    p.add_argument("--ci-level", type=float_in(0.5, 1.0, high_inclusive=False), default=0.95)
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(handler=_backtest, step="backtest")


def _backtest(args: argparse.Namespace) -> CommandResult:
    # torch scores the served models in this process; one thread, as `ranker train` defaults to
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from ranking.backtest.engine import (
        Backtest,
        BacktestSpec,
        CliReplayer,
        compare_to_baseline,
        finite_json,
        read_recipe,
        window_builder_for,
    )
    from ranking.backtest.report import build_report, write_report
    from ranking.cli.config import effective_config
    from ranking.config.loader import file_values, find_config_file
    from ranking.trainer.loop import code_version

    started = time.perf_counter()
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
    records = bt.run()
    comparisons = compare_to_baseline(bt, records)
    candidates = compare_to_baseline(bt, records, who="candidate")
    report = finite_json(
        build_report(spec.to_dict(), records, comparisons, time.perf_counter() - started, candidates)
    )
    paths = write_report(report, bt.folder / "report")
    if args.report_dir:
        args.report_dir.mkdir(parents=True, exist_ok=True)
        for path in paths.values():
            shutil.copy2(path, args.report_dir / Path(path).name)
    summary = {
        "backtest_dir": str(bt.folder),
        "report": paths,
        "baseline": spec.baseline,
        "recipes": report["recipes"],
        "vs_baseline": {
            name: (
                None
                if c is None
                else {"relative_change": c["relative_change"], "ci": c["ci"], "days": c["days"]}
            )
            for name, c in report["vs_baseline"].items()
        },
        "candidates_vs_baseline": {
            name: (
                None
                if c is None
                else {"relative_change": c["relative_change"], "ci": c["ci"], "days": c["days"]}
            )
            for name, c in report["candidates_vs_baseline"].items()
        },
        "wall_seconds": report["wall_seconds"],
    }
    lines = [f"backtest report: {paths['markdown']}"]
    for name, s in report["recipes"].items():
        c = report["vs_baseline"].get(name)
        hit = s["served_mean"]["save_hit_at_3"]
        line = (
            f"  {name}: served save HIT@3 {'—' if hit is None else f'{hit:.4f}'} over {s['served_days']} days, "
            f"{s['promotions']} promotions, longest staleness {s['longest_staleness_days']} d"
        )
        if c and c["relative_change"]["save_hit_at_3"] is not None and c["ci"]["save_hit_at_3"]:
            lo, hi = c["ci"]["save_hit_at_3"]
            line += (
                f"; vs {spec.baseline}: {100 * c['relative_change']['save_hit_at_3']:+.2f}%"
                f" [{100 * lo:+.2f}%, {100 * hi:+.2f}%]"
            )
        lines.append(line)
    return CommandResult(summary=summary, text="\n".join(lines))
