"""The gate suite (``ranker backtest --inject KIND@DAY,... [--gate NAME[=FILE]]``): every day's
candidate trained ONCE, bad candidates made for the injected days, then any number of gates
replayed on stored scores (replaying a gate costs seconds; training is the expensive part).

Layout (``<home>/backtests/<id>/<recipe>/suite/``)::

    candidates/<D>/            the clean candidate trained for eval day D (``ranker train --out``)
    injected/<kind>@<D>/       a bad candidate: ``home/`` the window it was made in (its data
                               validated like any run's), ``run/`` its training when the data
                               validation let it through
    probe/<D>/                 the naive candidates of the real-improvement probe
    scores/<model>@<D>.parquet  a model's scores on eval day D (computed once, on demand)
    report/                    suite.md, suite.json

Only recipes whose candidates do not depend on the gate's decisions can be replayed this way
(``warm_start`` none, base or a path; not champion, not incremental): the candidates are then
the same whatever a gate decided. Each injected candidate is judged in the state the clean replay
of the same gate reached on its day (its champion, references and history): one broken candidate
at a time, so every kind can be injected on several days without leaving no clean days.

Every window a candidate is trained on goes through the run's data validation step first
(``features.validation.step``, the shipped ``[validation]`` policies, the workspace's history and
schema), as in ``ranker run``: a bad window whose validation fails is stopped there, untrained, by
the anomaly it names; the others are trained and judged by the gate, with the validation's leak
verdict as the gate's evidence. The real-improvement probe: three naive candidates as the
champions before the fourth eval day, then the recipe's own candidate judged against them.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, JsonValue

from ranking.backtest import inject
from ranking.backtest.engine import WindowBuilder, prepare_recipe_home
from ranking.backtest.gates import ForwardDay, GateState, Regret, ReplayDay, regret_summary, replay
from ranking.backtest.replay import base_is_due
from ranking.backtest.spec import BacktestError, BacktestSpec, RecipeRun
from ranking.core.atomic import atomic_path, atomic_write_json
from ranking.core.hashing import sha256_file
from ranking.core.workspace import Workspace
from ranking.gate.checks import GateConfig, GateReport, LeakEvidence, TrainingWindow, run_gate
from ranking.gate.run import EvalExtras, eval_extras

if TYPE_CHECKING:
    import pandas as pd

    from features.window import WindowManifest, WindowPartition
    from ranking.config.loader import EffectiveConfig
    from ranking.core.summaries import ValidationSummary

log = logging.getLogger(__name__)

# (checkpoint, eval parquet, reset_tables) -> scores frame
Scorer = Callable[[Path, Path, bool], "pd.DataFrame"]


def check_recipe(run: RecipeRun) -> None:
    recipe = run.effective.config.recipe
    if recipe.warm_start == "champion" or recipe.incremental:
        raise BacktestError(
            f"recipe {run.recipe.name}: --inject replays gates on candidates trained once, which needs "
            "candidates that do not depend on the gate (warm_start none | base | a path, not champion)"
        )


@dataclass(frozen=True)
class Model:
    """A model the replay can score: a checkpoint (or another model's scores) and a transform."""

    key: str
    trained_for: dt.date  # its window's recorded end
    checkpoint: Path | None
    own_scores: Path | None  # eval_scores.parquet on its own eval day
    transform: str | None = None  # reset_tables | one of inject.SCORE_KINDS
    source: str | None = None  # the model whose scores a score transform starts from
    evidence: LeakEvidence | None = None  # its window's data-level leak checks and its lineage


class ScoreStore:
    """Scores of (model, day), computed once and kept under ``folder``."""

    def __init__(self, folder: Path, eval_parquet: Callable[[dt.date], Path], scorer: Scorer) -> None:
        self.folder = folder
        self.eval_parquet = eval_parquet
        self.scorer = scorer
        self.models: dict[str, Model] = {}
        self._hits: dict[tuple[str, dt.date], float] = {}

    def add(self, model: Model) -> None:
        self.models[model.key] = model

    def scores(self, key: str, day: dt.date) -> pd.DataFrame:
        import pandas as pd

        from ranking.evaluation.scores import write_scores

        path = self.folder / f"{key}@{day.isoformat()}.parquet"
        if path.is_file():
            return pd.read_parquet(path)
        model = self.models[key]
        if model.transform in inject.SCORE_KINDS:
            frame = self._transformed_scores(model.transform, self.scores(model.source or "", day), day)
        elif model.own_scores is not None and day == model.trained_for and model.transform is None:
            frame = pd.read_parquet(model.own_scores)
        else:
            if model.checkpoint is None:
                raise BacktestError(f"model {key} has no checkpoint to score on {day}")
            frame = self.scorer(model.checkpoint, self.eval_parquet(day), model.transform == "reset_tables")
        write_scores(path, frame)
        return frame

    def _transformed_scores(self, kind: str, base: pd.DataFrame, day: dt.date) -> pd.DataFrame:
        if kind == "nan_scores":
            return inject.nan_scores(base, seed=day.toordinal())
        if kind == "calibration_x3":
            return inject.rescaled_scores(base)
        import pyarrow.parquet as pq

        from ranking.evaluation.slices import USER_ACTIVITY

        examples = pq.read_table(self.eval_parquet(day), columns=["request_id", USER_ACTIVITY]).to_pandas()
        return inject.first_seen_shuffled(base, inject.first_seen_requests(examples), seed=day.toordinal())

    def hit(self, key: str, day: dt.date) -> float:
        from ranking.evaluation.scores import metrics_of

        if (key, day) not in self._hits:
            self._hits[(key, day)] = float(metrics_of(self.scores(key, day)).save_hit_at_3)
        return self._hits[(key, day)]


@dataclass(frozen=True)
class CleanValidation:
    """How the eval days' clean windows fared in the data validation."""

    days: int
    fail: int
    warn: int
    failing_kinds: list[str]


@dataclass(frozen=True)
class ProbeDay:
    """The recipe's candidate judged on its first day after the naive champions (with the leak
    evidence; ``decision_without_evidence``: as the gate before issue 30 judged it)."""

    day: str
    champion: str | None
    decision: str
    decision_without_evidence: str
    relative_change: float | None
    ci: list[float] | None
    failed_checks: list[str]
    warnings: list[str]
    leakage: str | None
    """the leakage check's detail"""


@dataclass(frozen=True)
class ProbeVerdict:
    """The real-improvement probe of one gate (``GateSuite._probe_verdict``)."""

    days: list[ProbeDay]
    promoted: int
    large_lift: int
    """days whose lift was above the gate's max_lift"""
    large_lift_promoted: int
    promoted_without_evidence: int


@dataclass(frozen=True)
class JudgedInjection:
    """One bad candidate: stopped by its window's data validation, or judged by the gate."""

    kind: str
    day: str
    validation: str | None
    """the data validation's verdict (None: the kind is made after the window)"""
    anomalies: list[str]
    """the failing anomalies' kinds"""
    named_anomaly: str | None
    """the anomaly the kind should raise (inject.DATA_KINDS)"""
    champion: str | None
    decision: str
    """pass | reject | stopped (by the validation)"""
    stopped_by: str | None
    """validation | gate | None (promoted)"""
    failed_checks: list[str]
    relative_change: float | None


@dataclass(frozen=True)
class GateReplay:
    """One gate replayed over the suite's days (``GateSuite.replay_gates``)."""

    config: GateConfig
    days: list[ReplayDay]
    forward: list[ForwardDay]
    regret: Regret
    promotions: int
    injected: list[JudgedInjection]
    stopped: dict[str, str]
    """kind -> how many of its bad candidates were stopped, as 2/3"""
    bad_promoted: int
    stopped_by_validation: int
    probe: ProbeVerdict | None
    replay_seconds: float

    def to_json(self) -> dict[str, JsonValue]:
        """As suite.json holds it (not yet made finite)."""
        return {
            "config": self.config.to_dict(),
            "days": [asdict(r) for r in self.days],
            "forward": [asdict(f) for f in self.forward],
            "regret": self.regret.model_dump(),
            "promotions": self.promotions,
            "injected": [asdict(b) for b in self.injected],
            "stopped": dict(self.stopped),
            "bad_promoted": self.bad_promoted,
            "stopped_by_validation": self.stopped_by_validation,
            "probe": asdict(self.probe) if self.probe else None,
            "replay_seconds": self.replay_seconds,
        }


class GateBrief(BaseModel):
    """One gate of the suite in ``ranker backtest --inject``'s summary."""

    regret: Regret
    stopped: dict[str, str]
    bad_promoted: int


# a recipe's entry in the summary: "report" -> its files, and each gate's name -> its brief
SuiteRecipeBrief = dict[str, GateBrief | dict[str, str]]


class SuiteSummary(BaseModel):
    """What ``ranker backtest --inject`` prints (``--json``)."""

    backtest_dir: str
    recipes: dict[str, SuiteRecipeBrief]


def suite_recipe_summary(paths: dict[str, str], result: Mapping[str, GateReplay]) -> SuiteRecipeBrief:
    brief: SuiteRecipeBrief = {"report": paths}
    for name, r in result.items():
        brief[name] = GateBrief(regret=r.regret, stopped=r.stopped, bad_promoted=r.bad_promoted)
    return brief


@dataclass
class GateSuite:
    ws: Workspace
    run: RecipeRun
    days: Sequence[dt.date]
    injections: Sequence[inject.Injection]
    gates: Mapping[str, GateConfig]
    scorer: Scorer
    window_builder: WindowBuilder
    on_progress: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        check_recipe(self.run)
        self.folder = self.run.folder / "suite"
        self.window_days = self.run.effective.config.window.days
        self.store = ScoreStore(self.folder / "scores", self._eval_parquet, self.scorer)
        self.validations: dict[str, ValidationSummary] = {}  # "clean@D" / injection key -> verdict
        self._extras_by_day: dict[dt.date, EvalExtras] = {}

    # ------------------------------------------------------------ data and training

    def _manifest(self, end: dt.date) -> WindowManifest:
        from features.window import read_window_manifest

        path = self.ws.window_manifest(end, self.window_days)
        if not path.is_file():
            self.window_builder(self.ws, end, self.window_days, self.run.effective.config.window.checks())
        return read_window_manifest(path)

    def _eval_parquet(self, day: dt.date) -> Path:
        return self._manifest(day).eval.path

    def _say(self, text: str) -> None:
        log.info("gate suite %s: %s", self.run.recipe.name, text)
        if self.on_progress:
            self.on_progress(text)

    def _failed(self, what: str, code: int, error: str | None) -> BacktestError:
        return BacktestError(
            f"recipe {self.run.recipe.name}: {what} failed (exit {code}): {error or 'see its log'}"
        )

    def _base(self, day: dt.date) -> Path | None:
        """The recipe's base for ``day`` (pretrained when due, as the weekly DAG would), or None."""
        from ranking.pipeline.pretrain import uses_base
        from ranking.registry import Registry, cache_dir

        config = self.run.effective.config
        if not uses_base(config):
            return None
        reg = Registry(str(self.run.home / "registry"))
        base = reg.base()
        if base_is_due(config, day, reg.record(base).train.get("train_end") if base else None):
            self._say(f"pretrain for {day}")
            self._pretrain(day)
            base = reg.base()
        if base is None:
            raise BacktestError(f"recipe {self.run.recipe.name}: no base model after pretraining for {day}")
        return reg.local_dir(base, cache_dir(Workspace.resolve(self.run.home))) / "model.pt"

    def _pretrain(self, day: dt.date) -> None:
        """What the weekly DAG would do before ``day``: ``ranker pretrain`` in the recipe's home."""
        from ranking.config.loader import load
        from ranking.pipeline.pretrain import execute_pretrain, plan_for
        from ranking.pipeline.steps import InProcessSteps

        home = Workspace.resolve(self.run.home)
        effective = load(home.root)
        run_id = f"suite-pretrain__{day.isoformat()}"
        plan = plan_for(effective.config, day)
        result = execute_pretrain(plan, effective, str(home.root), run_id, InProcessSteps(home, run_id))
        if result.exit_code != 0:
            raise self._failed(f"pretrain for {day}", result.exit_code, result.failure)

    def _train(
        self,
        home: Path,
        out: Path,
        end: dt.date,
        warm: Path | None,
        config_file: Path | None = None,
        effective: EffectiveConfig | None = None,
    ) -> Path:
        """A candidate trained on the window ending ``end`` by the recipe in ``home`` (or
        ``config_file``, or the ``effective`` config), from ``warm``, into ``out``, not registered."""
        from dataclasses import replace

        from ranking.config.loader import load
        from ranking.config.requests import train_job
        from ranking.pipeline import steps

        if (out / "model.pt").is_file() and (out / "eval_scores.parquet").is_file():
            return out
        ws = Workspace.resolve(home)
        run_id = f"suite__{out.name.replace('@', '__')}"
        config = effective or load(ws.root, config_file)
        job = train_job(config, ws, end, run_id=run_id, out=out, register=False)
        if warm is not None:
            job = replace(job, warm_start=str(warm))
        outcome = steps.InProcessSteps(ws, run_id).run("train", lambda: steps.train(job))
        if outcome.exit_code != 0:
            raise self._failed(f"training {out.name}", outcome.exit_code, outcome.error)
        return out

    def _crafted_home(self, injection: inject.Injection, folder: Path) -> Path:
        """A workspace holding only the day's window, its partitions transformed for the kind
        (each in a folder of its own, with its statistics computed by the validation)."""
        home = folder / "home"
        target = home / "windows" / f"{injection.day.isoformat()}_{self.window_days}d" / "manifest.json"
        if target.is_file():
            return home
        manifest = self._manifest(injection.day)
        if injection.kind == "leakage":
            crafted = inject.leaky_manifest(manifest)
        else:
            train = list(manifest.train)
            for i, part in enumerate(train):
                table = self._transformed(injection.kind, i, train)
                if table is not None:
                    train[i] = self._write_partition(home, part, table)
            crafted = manifest.model_copy(update={"train": tuple(train)})
        atomic_write_json(target, crafted.record())
        return home

    @staticmethod
    def _transformed(kind: str, i: int, train: Sequence[WindowPartition]) -> Any:
        """Training partition ``i`` as the kind breaks it (None: left as it is)."""
        import pyarrow.parquet as pq

        if kind == "day_duplicated":  # the last training day is the day before's file again
            return inject.redated(pq.read_table(train[i - 1].path)) if i == len(train) - 1 else None
        table = pq.read_table(train[i].path)
        transforms = {
            "shuffled_labels": lambda t: inject.shuffled_labels(t, seed=i),
            "zeroed_feature": inject.zeroed_feature,
            "null_spike": lambda t: inject.null_spike(t, seed=i),
            "rehashed_category": inject.rehashed_category,
            "rate_x100": inject.rate_x100,
            "label_rate_doubled": inject.positives_twice,
        }
        return transforms[kind](table)

    @staticmethod
    def _write_partition(home: Path, part: WindowPartition, table: Any) -> WindowPartition:
        import pyarrow.parquet as pq

        path = home / "partitions" / part.date.isoformat() / "examples.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        # recorded like the window builder's, so `ranker train`'s partition check accepts it
        return part.model_copy(
            update={
                "path": path,
                "rows": table.num_rows,
                "bytes": path.stat().st_size,
                "sha256": sha256_file(path),
            }
        )

    def _validate(self, key: str, home: Path, end: dt.date) -> ValidationSummary:
        """The run's data validation step on the window ending ``end`` in ``home``, judged against
        the backtested workspace's history and schema (recorded under ``key``)."""
        from features.validation.step import ValidationRequest, validate_window

        if key not in self.validations:
            config = self.run.effective.config.validation.validation_config()
            request = ValidationRequest(
                Workspace.resolve(home), end, self.window_days, config, history=self.ws
            )
            self.validations[key] = validate_window(request)
        return self.validations[key]

    def _evidence(self, validation: ValidationSummary) -> LeakEvidence:
        """The gate's evidence for a candidate trained on that window: its data-level leak checks;
        the lineage is the recipe's base, pretrained on the days before the window (or none)."""
        return LeakEvidence(
            data_checked=validation.leak_checked,
            data_clean=validation.leak_clean,
            lineage_checked=True,
            lineage_clean=True,
            detail=f"data validation {validation.verdict}",
        )

    def build(self) -> None:
        """Train every day's clean candidate and every trained bad one (finished ones are kept)."""
        prepare_recipe_home(self.run, self.ws.root)
        config_file = self.run.home / "ranker.toml"
        by_day: dict[dt.date, list[inject.Injection]] = {}
        for injection in self.injections:
            by_day.setdefault(injection.day, []).append(injection)
        for i, day in enumerate(self.days):
            started = time.perf_counter()
            self._manifest(day)
            clean = self._validate(f"clean@{day.isoformat()}", self.ws.root, day)
            if clean.verdict == "fail":
                self._say(f"the clean window of {day} fails its data validation: {clean.anomalies[0].detail}")
            base = self._base(day)
            warm = base
            out = self._train(self.run.home, self.folder / "candidates" / day.isoformat(), day, warm)
            key = f"c-{day.isoformat()}"
            self.store.add(
                Model(key, day, out / "model.pt", out / "eval_scores.parquet", evidence=self._evidence(clean))
            )
            for injection in by_day.get(day, []):
                self._inject(injection, key, out, warm, config_file)
            self._say(f"day {i + 1}/{len(self.days)} {day} built in {time.perf_counter() - started:.0f} s")
        self._build_probe()

    def clean_validation(self) -> CleanValidation:
        """How the eval days' clean windows fared in the data validation."""
        keys = (f"clean@{day.isoformat()}" for day in self.days)
        clean = [self.validations[k] for k in keys if k in self.validations]
        return CleanValidation(
            days=len(clean),
            fail=sum(1 for v in clean if v.verdict == "fail"),
            warn=sum(1 for v in clean if v.verdict == "warn"),
            failing_kinds=sorted({a.kind for v in clean for a in v.anomalies if a.policy == "fail"}),
        )

    # ------------------------------------------------------------ the real-improvement probe

    PROBE_CHAMPIONS = 3  # naive candidates served before the recipe's first

    def _probe_recipe(self) -> Path | None:
        """The naive recipe beside the suite's (None: the suite's recipe is naive, or none found)."""
        if self.run.recipe.name == "naive":
            return None
        path = self.run.recipe.path.parent / "naive.toml"
        return path if path.is_file() else None

    def _build_probe(self) -> None:
        """Naive candidates for every eval day but the last (the champions a recipe switch meets),
        trained from scratch on the same windows, validated like the others."""
        naive = self._probe_recipe()
        if naive is None or len(self.days) <= self.PROBE_CHAMPIONS:
            return
        from ranking.backtest.spec import read_recipe, recipe_config
        from ranking.config.loader import file_values, find_config_file

        base_file = find_config_file(self.ws.root)
        effective = recipe_config(
            read_recipe("naive", naive),
            file_values(base_file) if base_file else {},
            f"file:{base_file}" if base_file else None,
        )
        for day in self.days[:-1]:
            out = self._train(
                self.run.home, self.folder / "probe" / day.isoformat(), day, None, effective=effective
            )
            evidence = self.store.models[f"c-{day.isoformat()}"].evidence
            key = f"naive-{day.isoformat()}"
            self.store.add(Model(key, day, out / "model.pt", out / "eval_scores.parquet", evidence=evidence))
        self._say(f"probe: {len(self.days) - 1} naive candidates trained")

    def _probe_verdict(self, config: GateConfig) -> ProbeVerdict | None:
        """A switch from naive to the recipe on each eval day after the first PROBE_CHAMPIONS: the
        recipe's candidate judged in the state the gate reached serving naive the days before (a
        genuine improvement must be promoted on its first day), and again without the leak
        evidence, as the gate judged a large lift before issue 30."""
        if self._probe_recipe() is None or len(self.days) <= self.PROBE_CHAMPIONS:
            return None
        with_evidence, without = self.judge(config), self.judge(config, evidence=False)
        days: list[ProbeDay] = []
        changes: list[float | None] = []
        for i in range(self.PROBE_CHAMPIONS, len(self.days)):
            before, day = self.days[i - self.PROBE_CHAMPIONS : i], self.days[i]
            _, states = replay(
                [*before, day], {d: f"naive-{d.isoformat()}" for d in before}, config, with_evidence
            )
            candidate = f"c-{day.isoformat()}"
            report = with_evidence(day, candidate, states[-1])
            leak = next((c for c in report.checks if c.name == "leakage"), None)
            changes.append(report.relative_change)
            days.append(
                ProbeDay(
                    day=day.isoformat(),
                    champion=states[-1].champion.key if states[-1].champion else None,
                    decision=report.decision,
                    decision_without_evidence=without(day, candidate, states[-1]).decision,
                    relative_change=report.relative_change,
                    ci=report.ci,
                    failed_checks=report.failed_checks,
                    warnings=report.warnings,
                    leakage=leak.detail if leak else None,
                )
            )
        lifts = [d for d in days if d.relative_change is not None and d.relative_change > config.max_lift]
        return ProbeVerdict(
            days=days,
            promoted=sum(1 for d in days if d.decision == "pass"),
            large_lift=len(lifts),
            large_lift_promoted=sum(1 for d in lifts if d.decision == "pass"),
            promoted_without_evidence=sum(1 for d in days if d.decision_without_evidence == "pass"),
        )

    def _inject(
        self, injection: inject.Injection, clean: str, clean_dir: Path, warm: Path | None, config_file: Path
    ) -> None:
        day, kind = injection.day, injection.kind
        folder = self.folder / "injected" / injection.key
        evidence = self.store.models[clean].evidence
        if kind in inject.SCORE_KINDS:
            self.store.add(
                Model(injection.key, day, None, None, transform=kind, source=clean, evidence=evidence)
            )
            return
        if kind == "reset_tables":
            self.store.add(
                Model(
                    injection.key,
                    day,
                    clean_dir / "model.pt",
                    None,
                    transform="reset_tables",
                    evidence=evidence,
                )
            )
            return
        out = folder / "run"
        trained_for = day
        home = self.run.home
        if kind in inject.DATA_KINDS or kind == "shuffled_labels":
            home = self._crafted_home(injection, folder)
            validation = self._validate(injection.key, home, day)
            if validation.verdict == "fail":  # the run stops before training: nothing to gate
                self._say(f"{injection.key} stopped by its data validation ({validation.anomalies[0].kind})")
                return
            evidence = self._evidence(validation)
            self._train(home, out, day, warm, config_file)
        elif kind == "lr_x100":
            self._train(self.run.home, out, day, warm, self._lr_config(folder, clean_dir, config_file))
        elif kind == "stale_window":
            trained_for = day - dt.timedelta(days=inject.STALE_DAYS)
            self._manifest(trained_for)
            evidence = self._evidence(self._validate(f"clean@{trained_for}", self.ws.root, trained_for))
            self._train(self.run.home, out, trained_for, warm)
        else:  # pragma: no cover - KINDS and this function are kept in step by a test
            raise BacktestError(f"unknown injection kind {kind}")
        own = out / "eval_scores.parquet" if trained_for == day else None
        self.store.add(Model(injection.key, trained_for, out / "model.pt", own, evidence=evidence))

    @staticmethod
    def _lr_config(folder: Path, clean_dir: Path, config_file: Path) -> Path:
        """The recipe's config with both learning rates x100 (a typo in the optimizer section)."""
        import json

        lr_file = folder / "ranker.toml"
        if not lr_file.is_file():
            model_config = json.loads((clean_dir / "model_config.json").read_text())
            extra = "".join(
                f'\n[recipe.{name}]\nname = "{o["name"]}"\nlr = {o["lr"]!r}\n'
                for name, o in inject.scaled_optimizers(model_config).items()
            )
            text = config_file.read_text() if config_file.is_file() else ""
            folder.mkdir(parents=True, exist_ok=True)
            lr_file.write_text(text + extra)
        return lr_file

    # ------------------------------------------------------------ replay

    def _window(self, key: str) -> TrainingWindow:
        end = self.store.models[key].trained_for
        return TrainingWindow(end - dt.timedelta(days=self.window_days), end)

    def judge(
        self, config: GateConfig, evidence: bool = True
    ) -> Callable[[dt.date, str, GateState], GateReport]:
        """The gate ``config`` on a model's stored scores; ``evidence=False``: without the leak
        evidence (how a large lift was judged before issue 30)."""

        def run(day: dt.date, candidate: str, state: GateState) -> GateReport:
            champion = state.champion
            extras = self._extras(day)
            return run_gate(
                self.store.scores(candidate, day),
                self.store.scores(champion.key, day) if champion else None,
                config,
                eval_date=day,
                candidate_window=self._window(candidate),
                champion_window=self._window(champion.key) if champion else None,
                anchors={k: self.store.scores(k, day) for k in state.anchors},
                references={k: self.store.scores(k, day) for k in state.references},
                trend_reference=(state.trend, self.store.scores(state.trend, day)) if state.trend else None,
                history=state.history,
                leak_evidence=self.store.models[candidate].evidence if evidence else None,
                heuristic=extras.heuristic,
                slices=extras.slices,
            )

        return run

    def _extras(self, day: dt.date) -> EvalExtras:
        """The heuristic and the slices on the day's eval partition, as ``ranker gate`` reads them
        (the recipe's ``[heuristic]`` and ``[slices]``), each day once."""
        if day not in self._extras_by_day:
            config = self.run.effective.config
            self._extras_by_day[day] = eval_extras(
                self._eval_parquet(day), config.heuristic.heuristic_config(), config.slices.slice_config()
            )
        return self._extras_by_day[day]

    def _judged_injection(
        self,
        injection: inject.Injection,
        judge: Callable[[dt.date, str, GateState], GateReport],
        state: GateState,
    ) -> JudgedInjection:
        """One bad candidate: stopped by its window's data validation (named anomalies), or judged
        by the gate in the state the clean replay reached on its day."""
        from dataclasses import replace

        validation = self.validations.get(injection.key)
        failing = sorted({a.kind for a in validation.anomalies if a.policy == "fail"}) if validation else []
        stopped = JudgedInjection(
            kind=injection.kind,
            day=injection.day.isoformat(),
            validation=validation.verdict if validation else None,
            anomalies=failing,
            named_anomaly=inject.DATA_KINDS.get(injection.kind),
            champion=state.champion.key if state.champion else None,
            decision="stopped",
            stopped_by="validation",
            failed_checks=[],
            relative_change=None,
        )
        if validation is not None and validation.verdict == "fail":
            return stopped
        report = judge(injection.day, injection.key, state)
        return replace(
            stopped,
            decision=report.decision,
            stopped_by="gate" if report.decision == "reject" else None,
            failed_checks=report.failed_checks,
            relative_change=report.relative_change,
        )

    def replay_gates(self) -> dict[str, GateReplay]:
        candidates = {day: f"c-{day.isoformat()}" for day in self.days}
        out: dict[str, GateReplay] = {}
        for name, config in self.gates.items():
            started = time.perf_counter()
            judge = self.judge(config)
            records, states = replay(self.days, candidates, config, judge)
            forward = []
            for i in range(1, len(self.days)):
                day, before = self.days[i], records[i - 1]
                rec = records[i]
                if rec.champion is None or before.candidate is None:
                    continue
                promoted = before.decision == "pass"
                other = before.champion if promoted else before.candidate
                forward.append(
                    ForwardDay(
                        day.isoformat(),
                        self.store.hit(rec.champion, day),
                        self.store.hit(before.candidate, day),
                        self.store.hit(other, day) if other else None,
                        promoted,
                        (day - dt.date.fromisoformat(rec.champion_trained_for)).days
                        if rec.champion_trained_for
                        else None,
                    )
                )
            bad = [
                self._judged_injection(injection, judge, states[list(self.days).index(injection.day)])
                for injection in self.injections
            ]
            stopped = {k: [b.stopped_by is not None for b in bad if b.kind == k] for k in inject.KINDS}
            out[name] = GateReplay(
                config=config,
                days=records,
                forward=forward,
                regret=regret_summary(forward),
                promotions=sum(1 for r in records if r.decision == "pass"),
                injected=bad,
                stopped={k: f"{sum(v)}/{len(v)}" for k, v in stopped.items() if v},
                bad_promoted=sum(1 for b in bad if b.decision == "pass"),
                stopped_by_validation=sum(1 for b in bad if b.stopped_by == "validation"),
                probe=self._probe_verdict(config),
                replay_seconds=round(time.perf_counter() - started, 1),
            )
            self._say(f"gate {name} replayed in {out[name].replay_seconds} s")
        return out


# ---------------------------------------------------------------- report


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:+.2f}%"


def _f(x: Any) -> str:
    return "—" if x is None else f"{x:.4f}"


def _validation_lines(
    clean: CleanValidation | None, result: Mapping[str, GateReplay], gates: Sequence[str]
) -> list[str]:
    """How the data validation stopped the bugs made in windows, and how the clean windows fared."""
    lines: list[str] = []
    first = result[gates[0]].injected if gates else []
    data = [b for b in first if b.named_anomaly]
    if data:
        named = sum(1 for b in data if b.named_anomaly in b.anomalies)
        lines += [
            "",
            f"Bugs made in the window the run reads are validated first, as `ranker run` does: {named} of"
            f" {len(data)} were stopped by the anomaly their kind names (`ranking/backtest/inject.py`"
            " DATA_KINDS), untrained; the others (and every kind made after the window) go to the gate.",
        ]
    if clean:
        lines += [
            "",
            f"Clean windows validated: {clean.days}, failing {clean.fail}, warning {clean.warn}"
            + (f" (failing kinds: {', '.join(clean.failing_kinds)})" if clean.failing_kinds else "")
            + ".",
        ]
    return lines


def _injected_lines(result: Mapping[str, GateReplay], gates: Sequence[str]) -> list[str]:
    lines: list[str] = []
    for name in gates:
        lines += [
            "",
            f"### `{name}`: each injected candidate",
            "",
            "| day | kind | data validation (failing anomalies) | decision | stopped by | HIT@3 vs champion "
            "| failed checks |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for b in result[name].injected:
            validation = b.validation or "—"
            if b.anomalies:
                validation += " (" + ", ".join(f"`{a}`" for a in b.anomalies) + ")"
            lines.append(
                f"| {b.day} | `{b.kind}` | {validation} | {b.decision} | {b.stopped_by or '—'} | "
                f"{_pct(b.relative_change)} | {', '.join(b.failed_checks) or '—'} |"
            )
    return lines


def _probe_lines(result: Mapping[str, GateReplay], gates: Sequence[str], recipe: str) -> list[str]:
    lines: list[str] = []
    for name in gates:
        probe = result[name].probe
        if not probe:
            continue
        lines += [
            "",
            f"### `{name}`: the real-improvement probe",
            "",
            f"A switch from the naive recipe to `{recipe}` on each day: the naive candidates of the days before"
            f" served as champions, then the `{recipe}` candidate was judged. Promoted on its first day:"
            f" **{probe.promoted}/{len(probe.days)}**; lifts above `max_lift`: {probe.large_lift},"
            f" promoted {probe.large_lift_promoted}; without the leak evidence (the gate before issue 30):"
            f" promoted {probe.promoted_without_evidence}/{len(probe.days)}.",
            "",
            "| day | champion | HIT@3 vs champion (CI) | decision | without the evidence | failed checks | warnings |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for d in probe.days:
            ci = d.ci
            lines.append(
                f"| {d.day} | {d.champion or '—'} | {_pct(d.relative_change)}"
                f"{f' [{_pct(ci[0])}, {_pct(ci[1])}]' if ci else ''} | {d.decision} | {d.decision_without_evidence} | "
                f"{', '.join(d.failed_checks) or '—'} | {', '.join(d.warnings) or '—'} |"
            )
    return lines


def render_suite(
    spec: BacktestSpec,
    clean: CleanValidation | None,
    recipe: str,
    result: Mapping[str, GateReplay],
    wall_seconds: float,
) -> str:
    gates = list(result)
    lines = [
        f"# Gate suite {spec.id}: recipe `{recipe}`, {spec.days} days from {spec.start.isoformat()}",
        "",
        f"Wall time {wall_seconds / 60:.1f} min. Candidates trained once; each gate replayed on the stored scores. "
        "Served = the champion before the day's decision; always promote = yesterday's candidate; oracle = the "
        "better, on the day's impressions, of the two models the gate chose between the day before. "
        "Regret = oracle / served − 1.",
        "",
        "| gate | served save HIT@3 | oracle | always promote | regret vs oracle | vs always promote "
        "| staleness median / max | promotions | rejected a better candidate (largest miss) "
        "| promoted a worse one (largest miss) | bad candidates promoted |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in gates:
        g = result[name]
        r = g.regret
        rb, pw = r.rejected_a_better_candidate_sizes, r.promoted_a_worse_one_sizes
        lines.append(
            f"| `{name}` | {_f(r.served_mean)} | {_f(r.oracle_mean)} | {_f(r.always_promote_mean)} | "
            f"{_pct(r.regret_vs_oracle)} | {_pct(r.vs_always_promote)} | "
            f"{r.staleness_median_days} / {r.staleness_max_days} d | {g.promotions}/{spec.days} | "
            f"{r.rejected_a_better_candidate} ({_pct(rb[0]) if rb else '—'}) | "
            f"{r.promoted_a_worse_one} ({_pct(pw[0]) if pw else '—'}) | "
            f"{g.bad_promoted}/{len(g.injected)} |"
        )
    lines += [
        "",
        "![what each gate served; the bad candidates it stopped](suite.png)",
        "",
        "## Bad candidates stopped, by kind",
        "",
        "| kind | what it stands for | " + " | ".join(f"`{g}`" for g in gates) + " |",
    ]
    lines.append("| --- | --- | " + " | ".join("---" for _ in gates) + " |")
    for kind, doc in inject.KINDS.items():
        cells = [result[g].stopped.get(kind, "—") for g in gates]
        lines.append(f"| `{kind}` | {doc} | " + " | ".join(cells) + " |")
    lines += _validation_lines(clean, result, gates)
    lines += _injected_lines(result, gates)
    lines += _probe_lines(result, gates, recipe)
    for name in gates:
        lines += [
            "",
            f"### `{name}`: day by day (clean candidates)",
            "",
            "| day | served | candidate | decision | change vs champion (CI) | failed checks |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for d in result[name].days:
            ci = d.ci
            lines.append(
                f"| {d.day} | {d.champion or '—'} | {d.candidate or '—'} | {d.decision or '—'} | "
                f"{_pct(d.relative_change)} {'' if not ci else f'[{_pct(ci[0])}, {_pct(ci[1])}]'} | "
                f"{', '.join(d.failed_checks) or '—'} |"
            )
    lines.append("")
    return "\n".join(lines)


def plot_suite(spec: BacktestSpec, recipe: str, result: Mapping[str, GateReplay], path: Path) -> None:
    """Top: the save HIT@3 each gate served per day, with always-promote; bottom: each injected bad
    candidate per gate, stopped (green) or promoted (red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gates = list(result)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(11, 6 + 0.3 * len(gates)), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]}
    )
    always: dict[dt.date, float] = {}
    for name in gates:
        forward = result[name].forward
        xs = [dt.date.fromisoformat(f.day) for f in forward]
        top.plot(xs, [f.served for f in forward], marker="o", ms=3, label=f"served by gate `{name}`")
        always.update({x: f.fresh for x, f in zip(xs, forward, strict=True) if f.fresh is not None})
    days = sorted(always)
    top.plot(days, [always[d] for d in days], ls="--", color="grey", label="always promote")
    top.set_ylabel("save HIT@3 on the day")
    top.set_title(f"gate suite {spec.id} ({recipe}): what each gate served")
    top.grid(alpha=0.3)
    top.legend(fontsize=8)
    for row, name in enumerate(gates):
        for b in result[name].injected:
            stopped = b.decision == "reject"
            bottom.scatter(
                [dt.date.fromisoformat(b.day)],
                [row],
                marker="o" if stopped else "X",
                color="tab:green" if stopped else "tab:red",
                s=28 if stopped else 70,
            )
    bottom.set_yticks(range(len(gates)), [f"`{g}`" for g in gates])
    bottom.set_ylim(-0.7, len(gates) - 0.3)
    bottom.set_title("injected bad candidates: green stopped, red X promoted", fontsize=9)
    bottom.grid(alpha=0.3, axis="x")
    fig.autofmt_xdate()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_suite_report(
    folder: Path,
    spec: BacktestSpec,
    clean: CleanValidation | None,
    recipe: str,
    result: Mapping[str, GateReplay],
    wall_seconds: float,
) -> dict[str, str]:
    """suite.md, suite.png and suite.json (the spec with the clean windows' validation, each gate's replay)."""
    from ranking.backtest.report import finite_json
    from ranking.core.atomic import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": folder / "suite.md", "json": folder / "suite.json", "png": folder / "suite.png"}
    plot_suite(spec, recipe, result, paths["png"])
    atomic_write_text(paths["markdown"], render_suite(spec, clean, recipe, result, wall_seconds))
    recorded_spec = spec.to_dict() | ({"clean_validation": asdict(clean)} if clean else {})
    atomic_write_json(
        paths["json"],
        finite_json(
            {
                "spec": recorded_spec,
                "recipe": recipe,
                "gates": {name: replayed.to_json() for name, replayed in result.items()},
                "wall_seconds": round(wall_seconds, 1),
            }
        ),
    )
    return {k: str(v) for k, v in paths.items()}


def checkpoint_scorer(checkpoint: Path, eval_parquet: Path, reset_tables: bool) -> pd.DataFrame:
    """Scores of a checkpoint on an eval partition; ``reset_tables``: with every embedding table
    replaced by its initialisation (the model's own seed), the dense layers as trained."""
    from ranking.trainer.evaluation.scoring import score_checkpoint

    if not reset_tables:
        return score_checkpoint(checkpoint, eval_parquet)
    from ranking.trainer.checkpointing.checkpoint import load_checkpoint
    from ranking.trainer.evaluation.scoring import build_scoring_model, model_config_of, score_model
    from ranking.trainer.models.init import seed_tables

    payload = load_checkpoint(checkpoint)
    cfg = model_config_of(checkpoint, payload)
    state = dict(payload["model"])
    recorded_seed = payload.get("seed", 0)  # not a key the trainer writes (CheckpointPayload): 0
    seed = int(recorded_seed) if isinstance(recorded_seed, int) else 0
    for key, value in seed_tables(cfg, seed).items():
        if key not in state:
            raise BacktestError(f"{checkpoint}: no table {key} to reset")
        state[key] = value
    return score_model(build_scoring_model(cfg, state), [eval_parquet])
