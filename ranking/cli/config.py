"""The pipeline config on the command line: ``ranker config show`` and the parser that applies
the config to every step.

Each step's flags that have a config key are *bound* (``bindings()``): when the step is parsed,
every bound flag takes the effective value of its key — defaults < environment < config file <
the flag, if given (source ``flag``) < ``--params JSON``, a DAG run's Params (source ``param``).
The parsed args carry the result as
``args.pipeline_config`` (an :class:`~ranking.config.loader.EffectiveConfig`): keys without a
flag (``RECIPE_CONFIG_ONLY``, ``GATE_CONFIG_ONLY``, the study's window checks, the Feast store of
``features apply|materialize|window``) are read from it, and
``ranker train`` records it beside the run as ``effective_config.json``.

The file: ``--config FILE``, else ``$RANKER_CONFIG``, else ``<home>/ranker.toml`` (or .yaml).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.cli.common import CommandResult, add_common, effective_config, workspace
from ranking.cli.options import GATE_FLAGS, GATE_OPTIONS, flag_dest

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig, RawValue


@dataclass(frozen=True)
class Binding:
    dest: str  # argparse dest of the step's flag
    key: str  # dotted config key
    to_arg: Callable[[Any], Any] | None = None  # config value -> what the flag's type would give
    to_config: Callable[[Any], Any] | None = None  # parsed flag value -> config value


def _path_arg(value: Any) -> Any:
    return None if value is None else Path(value)


def _path_config(value: Any) -> Any:
    return None if value is None else str(Path(value).expanduser().resolve())


_MODEL_FILE = Binding("model_config", "recipe.model_file", _path_arg, _path_config)
# recipe keys without a `ranker train` flag (set in the config file or --params); every other
# recipe key is bound to the train flag of its name (model_file: --model-config)
RECIPE_CONFIG_ONLY = ("table_optimizer", "dense_optimizer")


def _gate_bindings() -> tuple[Binding, ...]:
    return tuple(Binding(flag_dest(option), f"gate.{name}") for option, name, _, _ in GATE_OPTIONS) + tuple(
        Binding(flag_dest(option), f"gate.{name}") for option, name, _ in GATE_FLAGS
    )


def bindings() -> dict[str, tuple[Binding, ...]]:
    """Step name -> its bound flags. Steps listed with no bindings still read (and validate) the
    config: they use keys without flags or hand it to their own steps."""
    from ranking.config.model import RecipeSection

    recipe = tuple(
        Binding(name, f"recipe.{name}")
        for name in RecipeSection.model_fields
        if name not in RECIPE_CONFIG_ONLY and f"recipe.{name}" != _MODEL_FILE.key
    )
    checks = tuple(Binding(dest, f"window.{dest}") for dest in ("days", "min_coverage"))
    return {
        # the Feast store (`features` section) has no flag: one apply renders it, and every later
        # step must name the same store, so it is set once, in the config file or the environment
        "apply": (),
        "materialize": (),
        "window": checks,
        # the thresholds and policies are the [validation] section's (config file or --params)
        "validate": (Binding("days", "window.days"),),
        "accept": (),
        "freshness": (Binding("max_lag_hours", "window.max_source_lag_hours"),),
        "train": (Binding("days", "window.days"), *recipe, _MODEL_FILE),
        "gate": _gate_bindings(),
        "metrics": tuple(Binding(d, f"metrics.{d}") for d in ("pushgateway", "textfile", "job")),
        "study": (
            Binding("pipeline", "recipe.pipeline"),
            Binding("batch_size", "recipe.batch_size"),
            _MODEL_FILE,
        ),
        "run": (
            Binding("days", "window.days"),
            Binding("epochs", "recipe.epochs"),
            Binding("schedule", "recipe.schedule"),
            Binding("pipeline", "recipe.pipeline"),
            *_gate_bindings(),
        ),
        "pretrain": tuple(
            Binding(dest, f"pretrain.{dest}") for dest in ("days", "gap_days", "schedule", "epochs", "seed")
        ),
        "backtest": tuple(
            Binding(dest, f"backtest.{dest}") for dest in ("bootstrap_samples", "ci_level", "seed")
        ),
        "config-show": (),
    }


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


class RankerParser(argparse.ArgumentParser):
    """An ArgumentParser whose step subparsers fill unset bound flags from the pipeline config.

    Subparsers inherit the class (argparse creates them with the parent's type). Bound dests are
    pre-set to a sentinel: argparse leaves a dest that is already on the namespace alone unless
    its flag is given, which is how a given flag is told apart from one equal to the default.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        step = self._defaults.get("step")
        table = bindings().get(step) if isinstance(step, str) else None
        if table is None:
            return super().parse_known_args(args, namespace)
        ns = namespace if namespace is not None else argparse.Namespace()
        for b in table:
            setattr(ns, b.dest, _UNSET)
        ns, rest = super().parse_known_args(args, ns)
        given: dict[str, RawValue] = {}
        for b in table:
            value = getattr(ns, b.dest)
            if value is not _UNSET:
                given[b.key] = b.to_config(value) if b.to_config else value
        from ranking.config.loader import load, parse_params

        effective = load(
            workspace(ns).root,
            getattr(ns, "config", None),
            given,
            params=parse_params(getattr(ns, "params", None)),
        )
        for b in table:
            if getattr(ns, b.dest) is _UNSET or effective.sources[b.key] == "param":
                value = effective.value(b.key)
                setattr(ns, b.dest, b.to_arg(value) if b.to_arg else value)
        ns.pipeline_config = effective
        return ns, rest

    def format_help(self) -> str:
        """The step's help, each bound flag naming its config key and the config's default: the
        flag's own argparse default is never used (an unset flag takes the effective value), so
        it is not what ``--help`` shows."""
        step = self._defaults.get("step")
        table = bindings().get(step) if isinstance(step, str) else None
        if not table:
            return super().format_help()
        from ranking.config.model import PipelineConfig, flatten

        defaults = flatten(PipelineConfig())
        keys = {b.dest: b.key for b in table}
        bound = [a for a in self._actions if a.dest in keys and a.help != argparse.SUPPRESS]
        own = {a.dest: a.help for a in bound}
        for action in bound:
            action.help = bound_flag_help(action.help, keys[action.dest], defaults[keys[action.dest]])
        try:
            return super().format_help()
        finally:
            for action in bound:
                action.help = own[action.dest]


def bound_flag_help(text: str | None, key: str, default: Any) -> str:
    """A bound flag's help: its own text, then ``[config KEY, default VALUE]`` (a default of None
    means something per key, which the flag's own text says: only the key is named)."""
    shown = "" if default is None else f", default {_shown(default)}"
    note = f"[config {key}{shown}]".replace("%", "%%")  # argparse %-formats help
    return f"{text} {note}" if text else note


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as the config file writes it
    return str(value)


@contextlib.contextmanager
def config_env(args: argparse.Namespace) -> Iterator[None]:
    """Point ``$RANKER_CONFIG`` at ``--config`` while a command runs its own steps (``ranker
    run``'s in-process steps, the study's ``ranker train`` processes), so they read the same file."""
    from ranking.config.loader import CONFIG_ENV

    explicit = getattr(args, "config", None)
    if explicit is None:
        yield
        return
    before = os.environ.get(CONFIG_ENV)
    os.environ[CONFIG_ENV] = str(Path(explicit).expanduser().resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONFIG_ENV, None)
        else:
            os.environ[CONFIG_ENV] = before


def render_text(effective: EffectiveConfig) -> str:
    from ranking.config.render import to_toml

    files = ", ".join(effective.files) or "none (built-in defaults)"
    header = f"# effective pipeline config; file: {files}\n# each value's source follows it\n"
    return header + to_toml(effective.config.model_dump(mode="json"), effective.sources).rstrip("\n")


def _show(args: argparse.Namespace) -> CommandResult:
    effective = effective_config(args)
    return CommandResult(effective.to_dict(), text=render_text(effective))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``config show`` to ``ranker``."""
    cfg = sub.add_parser("config", help="the pipeline config: show the effective values and their sources")
    csub = cfg.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    p = add_common(
        csub.add_parser(
            "show",
            help="print the effective config and where each value came from (default | env | file | flag)",
        )
    )
    p.set_defaults(handler=_show, step="config-show")
