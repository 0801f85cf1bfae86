"""``ranker models diff A B``: two registered versions side by side, read through the registry's
records (``version.json``, the version's ``train_manifest.json``, ``effective_config.json`` and
``model_config.json``, the gate's verdict). :func:`diff_versions` is pure; :func:`diff_models` reads."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from ranking.core.summaries import Summary
from ranking.registry.records import EvalRecord, Verdict, VersionRecord
from ranking.registry.registry import Registry

# the files of a version the diff reads, besides version.json (its eval.json is copied there)
DIFF_FILES = ("effective_config.json", "train_manifest.json", "model_config.json")
METRICS = (
    "save_hit_at_3",
    "auc",
    "ne",
    "log_loss",
    "calibration",
    "base_rate",
    "rows",
    "requests_with_save",
)
_RECIPE_KEYS = ("schedule", "schedule_spec", "pipeline", "seed", "world_size")


@dataclass(frozen=True)
class DiffRequest:
    registry: str
    a: str
    b: str


@dataclass(frozen=True)
class VersionView:
    """What the diff reads of one version: its record, the JSON of each of :data:`DIFF_FILES` it
    holds (a file it lacks is absent) and its verdict."""

    record: VersionRecord
    files: Mapping[str, JsonValue]
    verdict: Verdict | None


class Row(Summary):
    """One key of both versions (null: the version does not say)."""

    key: str
    a: JsonValue
    b: JsonValue
    same: bool


class ConfigRow(Row):
    a_source: str | None
    """where A's value came from (effective_config.json's sources; null for the recipe and model)"""
    b_source: str | None


class ConfigDiff(Summary):
    differing: list[ConfigRow]
    """only the keys whose values differ"""
    equal: int
    """how many keys hold the same value in both"""


class MetricRow(Summary):
    name: str
    a: float | None
    b: float | None
    delta: float | None
    """B − A"""
    relative: float | None
    """(B − A) / |A|; null when A is 0 or either is missing"""


class CheckSide(Summary):
    passed: bool | None
    value: float | None
    threshold: JsonValue


class CheckRow(Summary):
    name: str
    a: CheckSide | None
    """null: A's verdict has no such check (or A was never gated)"""
    b: CheckSide | None


class GateDiff(Summary):
    verdict: list[Row]
    """decision, failed checks, the champion compared with, relative change, rejection"""
    checks: list[CheckRow]


class ModelsDiff(Summary):
    """``ranker models diff``: config, data, metrics, gate checks and lineage of two versions."""

    registry: str
    a: str
    b: str
    missing: dict[str, list[str]]
    """per version, the files the diff reads that it does not hold (shown as "-")"""
    config: ConfigDiff
    data: list[Row]
    metrics: list[MetricRow]
    gate: GateDiff
    lineage: list[Row]


def _flatten(value: JsonValue, prefix: str, out: dict[str, JsonValue]) -> None:
    """``value``'s leaves as ``prefix.key.inner`` keys; nothing when it is not an object (a file
    the version lacks)."""
    if not isinstance(value, dict):
        return
    for key, inner in value.items():
        if isinstance(inner, dict) and inner:
            _flatten(inner, f"{prefix}.{key}", out)
        else:
            out[f"{prefix}.{key}"] = inner


def _obj(value: JsonValue | None) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def _config_keys(view: VersionView) -> tuple[dict[str, JsonValue], dict[str, str]]:
    """Every config key of a version (``config.`` the effective pipeline config, ``recipe.`` and
    ``train_config.`` the training manifest's, ``model.`` the model config) and each effective
    key's source."""
    keys: dict[str, JsonValue] = {}
    effective = _obj(view.files.get("effective_config.json"))
    _flatten(effective.get("config"), "config", keys)
    sources = {f"config.{k}": str(v) for k, v in _obj(effective.get("sources")).items()}
    manifest = _obj(view.files.get("train_manifest.json"))
    for key in _RECIPE_KEYS:
        if key in manifest:
            keys[f"recipe.{key}"] = manifest[key]
    epochs = manifest.get("epochs")
    if epochs is not None:
        keys["recipe.epochs"] = len(epochs) if isinstance(epochs, list) else epochs
    _flatten(manifest.get("train_config"), "train_config", keys)
    _flatten(view.files.get("model_config.json"), "model", keys)
    return keys, sources


def _config(a: VersionView, b: VersionView) -> ConfigDiff:
    (ka, sa), (kb, sb) = _config_keys(a), _config_keys(b)
    differing, equal = [], 0
    for key in sorted(ka.keys() | kb.keys()):
        va, vb = ka.get(key), kb.get(key)
        if va == vb and (key in ka) == (key in kb):
            equal += 1
        else:
            differing.append(
                ConfigRow(key=key, a=va, b=vb, same=False, a_source=sa.get(key), b_source=sb.get(key))
            )
    return ConfigDiff(differing=differing, equal=equal)


def _rows(pairs: list[tuple[str, JsonValue, JsonValue]]) -> list[Row]:
    return [Row(key=k, a=va, b=vb, same=va == vb) for k, va, vb in pairs]


def _data_fields(view: VersionView) -> dict[str, JsonValue]:
    train, manifest = view.record.train, _obj(view.files.get("train_manifest.json"))
    window = _obj(manifest.get("window"))
    validation = _obj(manifest.get("data_validation"))
    return {
        "window end": window.get("end", train.get("train_end")),
        "days": window.get("days"),
        "train days": f"[{train['train_start']}, {train['train_end']})" if "train_start" in train else None,
        "eval date": view.record.eval.get("eval_date", window.get("eval_date")),
        "rows (train)": window.get("rows_train"),
        "rows (eval)": window.get("rows_eval", view.record.eval.get("rows")),
        "feature version": train.get("feature_version", window.get("feature_version")),
        # the window id hashes its end, days and partitions' keys (features/window.py)
        "window id": train.get("window_id", manifest.get("window_id", window.get("window_id"))),
        "data validation": validation.get("verdict"),
        "validation counts": validation.get("counts"),
    }


def _lineage_fields(view: VersionView) -> dict[str, JsonValue]:
    rec, manifest = view.record, _obj(view.files.get("train_manifest.json"))
    warm = _obj(rec.train.get("warm_start") or manifest.get("warm_start"))  # type: ignore[arg-type]
    lineage = _obj(rec.train.get("lineage") or manifest.get("lineage"))  # type: ignore[arg-type]
    return {
        "run id": rec.run_id,
        "created": rec.created_at,
        "who": rec.who,
        "code version": rec.train.get("code_version", manifest.get("code_version")),
        "warm start": warm.get("source"),
        "kind": lineage.get("kind"),
        "parent": lineage.get("parent"),
        "full retrain end": lineage.get("full_retrain_end"),
        "recipe source": manifest.get("recipe_source"),
    }


def _paired(fa: dict[str, JsonValue], fb: dict[str, JsonValue]) -> list[Row]:
    return _rows([(k, fa[k], fb.get(k)) for k in fa])


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _metrics(a: EvalRecord, b: EvalRecord) -> list[MetricRow]:
    rows = []
    for name in METRICS:
        va, vb = _number(a.get(name)), _number(b.get(name))
        if va is None and vb is None:
            continue
        delta = vb - va if va is not None and vb is not None else None
        relative = delta / abs(va) if delta is not None and va else None
        rows.append(MetricRow(name=name, a=va, b=vb, delta=delta, relative=relative))
    return rows


def _checks(verdict: Verdict | None) -> dict[str, CheckSide]:
    found = (verdict.model_extra or {}).get("checks") if verdict else None
    out: dict[str, CheckSide] = {}
    for check in found if isinstance(found, list) else []:
        if isinstance(check, dict) and isinstance(check.get("name"), str):
            passed = check.get("passed")
            out[check["name"]] = CheckSide(
                passed=passed if isinstance(passed, bool) else None,
                value=_number(check.get("value")),
                threshold=check.get("threshold"),
            )
    return out


def _verdict_fields(verdict: Verdict | None) -> dict[str, JsonValue]:
    if verdict is None:
        return {"decision": None, "failed checks": None, "champion": None, "relative change": None,
                "rejected": None}  # fmt: skip
    return {
        "decision": verdict.decision,
        "failed checks": list(verdict.failed_checks),
        "champion": verdict.champion_version,
        "relative change": verdict.relative_change,
        "rejected": verdict.rejected.reason if verdict.rejected else None,
    }


def _gate(a: Verdict | None, b: Verdict | None) -> GateDiff:
    ca, cb = _checks(a), _checks(b)
    names = [*ca, *(n for n in cb if n not in ca)]
    return GateDiff(
        verdict=_paired(_verdict_fields(a), _verdict_fields(b)),
        checks=[CheckRow(name=n, a=ca.get(n), b=cb.get(n)) for n in names],
    )


def diff_versions(registry: str, a: VersionView, b: VersionView) -> ModelsDiff:
    """The two versions side by side (pure)."""
    return ModelsDiff(
        registry=registry,
        a=a.record.version,
        b=b.record.version,
        missing={
            side: [name for name in DIFF_FILES if name not in view.files]
            for side, view in (("a", a), ("b", b))
        },
        config=_config(a, b),
        data=_paired(_data_fields(a), _data_fields(b)),
        metrics=_metrics(a.record.eval, b.record.eval),
        gate=_gate(a.verdict, b.verdict),
        lineage=_paired(_lineage_fields(a), _lineage_fields(b)),
    )


def _view(reg: Registry, version: str) -> VersionView:
    rec = reg.record(version)  # RegistryError: unknown or incomplete version
    files: dict[str, JsonValue] = {}
    for name in DIFF_FILES:
        if name in rec.files:
            try:
                files[name] = json.loads(reg.read_file(version, name))
            except json.JSONDecodeError:
                continue  # not JSON: shown as missing
    return VersionView(record=rec, files=files, verdict=reg.verdict(version))


def diff_models(req: DiffRequest) -> ModelsDiff:
    reg = Registry(req.registry)
    return diff_versions(reg.url, _view(reg, req.a), _view(reg, req.b))
