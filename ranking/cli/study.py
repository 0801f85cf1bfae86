"""`ranker study`: the schedule study (ranking/study/) as one command."""

from __future__ import annotations

import argparse

from ranking.cli.common import (
    CommandResult,
    ListOf,
    OneOf,
    add_common,
    config_type,
    int_in,
    parse_date,
    path_arg,
    progress_printer,
    run_id_arg,
    workers_int,
    workspace,
)
from ranking.study.spec import INITS
from ranking.trainer.models.config import PIPELINES
from ranking.trainer.schedule import NAMED_SCHEDULES

# every window x schedule x init x seed is a training run, each evaluated at every epoch count:
# the study's size is their product
MAX_LIST_ITEMS = 10
MAX_SEEDS = 20


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "study",
        help="schedule study: every schedule x epochs x window x seed, relative to 1-epoch joint",
        description="Train every combination from the same starting point on the same data, "
        "evaluate all on the same eval day, write a Markdown + PNG + JSON report. Finished runs are "
        "reused when the study is re-run.",
    )
    add_common(p)
    p.add_argument("--end", type=parse_date, required=True, help="eval day (windows end here)")
    p.add_argument(
        "--windows",
        type=ListOf(config_type("window.days"), MAX_LIST_ITEMS),
        default=(10, 20),
        help="window lengths in days (10,20)",
    )
    p.add_argument(
        "--epochs",
        type=ListOf(config_type("recipe.epochs"), MAX_LIST_ITEMS),
        default=(1, 2, 3, 4),
        help="epoch counts (1,2,3,4)",
    )
    p.add_argument(
        "--schedules",
        type=ListOf(OneOf(NAMED_SCHEDULES), len(NAMED_SCHEDULES)),
        default=("joint", "frozen", "delayed", "joint_then_frozen"),
    )
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=3)
    p.add_argument(
        "--inits",
        type=ListOf(OneOf(INITS), len(INITS)),
        default=("scratch", "warm"),
        help="scratch,warm[,warm_dense]",
    )
    p.add_argument(
        "--warm-offset-days",
        type=config_type("window.days"),
        default=None,
        help="warm start trained on the window ending this many days earlier (default: the window length)",
    )
    # bound to recipe.pipeline / recipe.batch_size: an unset flag takes the config's value
    p.add_argument("--pipeline", choices=PIPELINES, default=None)
    p.add_argument("--batch-size", type=config_type("recipe.batch_size"), default=None)
    p.add_argument("--model-config", type=path_arg, default=None)
    p.add_argument("--parallel", type=workers_int, default=None, help="runs at a time (default: CPU cores)")
    p.add_argument(
        "--name",
        type=run_id_arg,
        default=None,
        help="study folder under <home>/studies (default study-<end>)",
    )
    p.add_argument(
        "--report-dir", type=path_arg, default=None, help="also copy the report here (e.g. docs/study)"
    )
    p.set_defaults(handler=_study, step="study")


def _study(args: argparse.Namespace) -> CommandResult:
    from ranking.cli.config import config_env, effective_config
    from ranking.study.run import StudyRequest, run_study
    from ranking.study.spec import StudySpec

    config = effective_config(args).config
    request = StudyRequest(
        workspace=workspace(args),
        spec=StudySpec(
            end=args.end,
            windows=args.windows,
            epochs=args.epochs,
            schedules=args.schedules,
            seeds=args.seeds,
            inits=args.inits,
            warm_offset_days=args.warm_offset_days,
            pipeline=args.pipeline,
            batch_size=args.batch_size,
            model_config=str(args.model_config.resolve()) if args.model_config else None,
        ),
        name=args.name,
        parallel=args.parallel,
        report_dir=args.report_dir,
        on_progress=progress_printer("study", unit="run", label="run"),
        window_checks=config.window.checks(),
        store_settings=config.features.store_settings(),
    )
    with config_env(args):  # the study's `ranker train` processes read the same config
        outcome = run_study(request)
    text = "\n".join(
        [f"study report: {outcome.paths['markdown']}"]
        + [
            f"  [{c.init}] {c.finding}: seed {c.seed_pct:+.2f}% ours "
            f"{c.ours_pct_mean:+.2f}% ± {c.ours_pct_sd:.2f} -> {c.verdict}"
            for c in outcome.report.seed_comparison
        ]
    )
    return CommandResult(summary=outcome.summary(), text=text)
