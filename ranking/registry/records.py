"""What the registry stores about versions and alias moves, and who/when stamps on them."""

from __future__ import annotations

import datetime as dt
import getpass
import os
import unicodedata
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer, SkipValidation, ValidationError
from typing_extensions import TypedDict  # what pydantic reads on Python 3.11 (typing's from 3.12)

from ranking.core.errors import RegistryError

ACTOR_ENV = "RANKER_ACTOR"

# the training-manifest fields worth showing in `models list` without opening the manifest
_TRAIN_SUMMARY_KEYS = (
    "schedule",
    "epochs",
    "seed",
    "pipeline",
    "window_id",
    "feature_version",
    "code_version",
    "lineage",  # full | incremental, parent version, last full retrain (ranking.trainer.lineage)
)


# control, format (bidi overrides, zero-width) and line/paragraph separators: in a reason or a
# user name they would let one history line print as several (a forged event) or reorder text
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _unprintable(value: str) -> list[str]:
    return [c for c in value if unicodedata.category(c) in _UNPRINTABLE_CATEGORIES]


def check_text(field_name: str, value: str | None, *, required: str | None = None) -> str:
    """A free-text value stored in the history (a reason, who acted), stripped: one line of
    printable text. RegistryError(``required``) when it is empty and ``required`` is given."""
    text = (value or "").strip()
    if required is not None and not text:
        raise RegistryError(required)
    bad = _unprintable(text)
    if bad:
        raise RegistryError(
            f"{field_name} must be one line of printable text: {text!r} holds"
            f" {', '.join(sorted({repr(c) for c in bad}))}"
        )
    return text


def escape_text(value: object) -> str:
    """``value`` as one printable line: what `check_text` refuses is shown escaped (``\\n``), so
    an event written before that check (or by hand) cannot print as several history lines."""
    return "".join(
        c.encode("unicode_escape").decode() if unicodedata.category(c) in _UNPRINTABLE_CATEGORIES else c
        for c in str(value)
    )


def current_actor() -> str:
    """Who is acting: $RANKER_ACTOR (set by Airflow to the triggering user), else the OS user."""
    actor = os.environ.get(ACTOR_ENV)
    if actor and not actor.strip():
        raise RegistryError(f"${ACTOR_ENV} is blank: set it to who acts, or unset it (the OS user)")
    if actor:
        return check_text(f"${ACTOR_ENV}", actor)
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # containers without a passwd entry
        return "unknown"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _as_read(value: Any) -> Any:
    return value


_Record = TypeVar("_Record")
# a registry record's JSON carried in a command's summary model: neither validated again nor
# re-serialised by its type (which would drop a key an older writer recorded), shown as read
AsRecorded = Annotated[_Record, SkipValidation, PlainSerializer(_as_read)]


class Blessing(TypedDict, total=False):
    """What an alias event records about the verdict it was promoted on
    (:func:`ranking.registry.blessing.blessing_digest`): the verdict's fields, or only ``decision``
    (None) when there was none, and why it did not bless the promotion (``problem``: forced)."""

    decision: str | None
    champion_version: str | None
    eval_date: str | None
    relative_change: float | None
    ci: list[float] | None
    failed_checks: list[str]
    run_id: str | None
    problem: str | None


# an event file (``aliases/<alias>/<seq>.json``); "from" and "to" are Python keywords
AliasEventJson = TypedDict(
    "AliasEventJson",
    {
        "seq": int,
        "alias": str,
        "from": NotRequired[str | None],
        "to": str,
        "action": str,
        "when": str,
        "run_id": NotRequired[str | None],
        "reason": NotRequired[str],
        "who": NotRequired[str],
        "forced": NotRequired[bool],
        "blessing": NotRequired[Blessing | None],
    },
)


@dataclass(frozen=True)
class AliasEvent:
    """One move of an alias. ``from_version`` is None for the first promotion."""

    seq: int
    alias: str
    from_version: str | None
    to_version: str
    action: str  # promote | rollback
    when: str
    run_id: str | None
    reason: str
    who: str
    forced: bool = False
    blessing: Blessing | None = None

    def to_dict(self) -> AliasEventJson:
        return {
            "seq": self.seq,
            "alias": self.alias,
            "from": self.from_version,
            "to": self.to_version,
            "action": self.action,
            "when": self.when,
            "run_id": self.run_id,
            "reason": self.reason,
            "who": self.who,
            "forced": self.forced,
            "blessing": self.blessing,
        }

    @classmethod
    def from_dict(cls, d: AliasEventJson) -> AliasEvent:
        return cls(
            seq=int(d["seq"]),
            alias=str(d["alias"]),
            from_version=d.get("from"),
            to_version=str(d["to"]),
            action=str(d["action"]),
            when=str(d["when"]),
            run_id=d.get("run_id"),
            reason=str(d.get("reason", "")),
            who=str(d.get("who", "unknown")),
            forced=bool(d.get("forced", False)),
            blessing=d.get("blessing"),
        )


class FileChecksum(TypedDict):
    sha256: str
    bytes: int


class EvalRecord(TypedDict, total=False):
    """The version's ``eval.json``: the trainer's offline metrics on its eval day
    (``ranking.evaluation.metrics.OfflineMetrics``) and the day."""

    save_hit_at_3: float
    auc: float
    ne: float
    log_loss: float
    calibration: float
    base_rate: float
    rows: int
    requests_with_save: int
    eval_date: str


class TrainWindowJson(TypedDict, total=False):
    end: str
    days: int


class WarmStartJson(TypedDict, total=False):
    source: str | None  # none | champion vN | base vN | path
    path: str | None
    scope: str | None


class LineageJson(TypedDict, total=False):
    """``ranking.core.summaries.Lineage`` as JSON."""

    kind: str
    parent: str | None
    full_retrain_end: str
    since: str | None
    reason: str


class TrainRecord(TypedDict, total=False):
    """What a version record says of its training (``train`` in ``version.json``): the training
    manifest's fields of :data:`_TRAIN_SUMMARY_KEYS` and the window's days ``[train_start, train_end)``."""

    schedule: str
    epochs: int
    seed: int
    pipeline: str
    window_id: str
    feature_version: str
    code_version: str
    lineage: LineageJson
    train_start: str
    train_end: str
    warm_start: WarmStartJson
    # read by the gate (ranking.gate.run.leak_evidence), but train_summary does not copy them
    data_validation: dict[str, JsonValue] | None
    recipe_source: str | None


class TrainManifestJson(TypedDict, total=False):
    """The fields of a run's ``train_manifest.json`` (ranking/trainer/loop.py) the registry reads."""

    schedule: str
    epochs: int | list[JsonValue]  # per-epoch stats in older manifests
    seed: int
    pipeline: str
    window_id: str
    feature_version: str
    code_version: str
    lineage: LineageJson
    window: TrainWindowJson
    warm_start: WarmStartJson


class VersionRecordJson(TypedDict):
    version: str
    created_at: str
    run_id: str | None
    source_run_dir: NotRequired[str]
    files: dict[str, FileChecksum]
    eval: NotRequired[EvalRecord]
    train: NotRequired[TrainRecord]
    who: NotRequired[str]


@dataclass(frozen=True)
class VersionRecord:
    """The content of ``version.json``: what was registered, with checksums."""

    version: str
    created_at: str
    run_id: str | None
    source_run_dir: str
    files: dict[str, FileChecksum]
    eval: EvalRecord = field(default_factory=lambda: EvalRecord())
    train: TrainRecord = field(default_factory=lambda: TrainRecord())
    who: str = "unknown"

    def to_dict(self) -> VersionRecordJson:
        return {
            "version": self.version,
            "created_at": self.created_at,
            "run_id": self.run_id,
            "source_run_dir": self.source_run_dir,
            "files": self.files,
            "eval": self.eval,
            "train": self.train,
            "who": self.who,
        }

    @classmethod
    def from_dict(cls, d: VersionRecordJson) -> VersionRecord:
        return cls(
            version=str(d["version"]),
            created_at=str(d["created_at"]),
            run_id=d.get("run_id"),
            source_run_dir=str(d.get("source_run_dir", "")),
            files=dict(d["files"]),
            eval=EvalRecord(**(d.get("eval") or {})),
            train=TrainRecord(**(d.get("train") or {})),
            who=str(d.get("who", "unknown")),
        )


def training_window(train_manifest: TrainManifestJson) -> tuple[dt.date, dt.date] | None:
    """The training days ``[start, end)`` of a training manifest (``window: {end, days}``, as the
    trainer writes it: ranking/trainer/loop.py); None when it does not say."""
    window = train_manifest.get("window")
    if not isinstance(window, dict) or window.get("end") is None or window.get("days") is None:
        return None
    try:
        end = dt.date.fromisoformat(str(window["end"]))
        return end - dt.timedelta(days=int(window["days"])), end
    except (TypeError, ValueError):
        return None


def train_summary(manifest: TrainManifestJson) -> TrainRecord:
    """The training summary a version record carries (``train`` in ``version.json``)."""
    found = dict(manifest.items())
    out = cast(TrainRecord, {k: found[k] for k in _TRAIN_SUMMARY_KEYS if k in found})
    epochs = manifest.get("epochs")
    if isinstance(epochs, list):  # per-epoch stats: the count is what a listing needs
        out["epochs"] = len(epochs)
    window = training_window(manifest)
    if window is not None:
        out["train_start"], out["train_end"] = window[0].isoformat(), window[1].isoformat()
    warm = manifest.get("warm_start")
    if warm is not None:
        out["warm_start"] = warm
    return out


class Rejection(BaseModel):
    """A rejection recorded on a version (``ranker reject``, the DAG's record_rejection)."""

    model_config = ConfigDict(frozen=True)

    when: str
    reason: str
    run_id: str | None = None
    who: str | None = None


class Verdict(BaseModel):
    """The gate's verdict on a version as the registry keeps it (``verdicts/<vNNNN>.json``): the
    gate report's body (the ``gate`` step summary's fields; the rest of the report is kept as it
    is), who ran it and when, and a rejection recorded on the version. Readers use the fields
    named here; a verdict written before a field existed reads with its default."""

    model_config = ConfigDict(frozen=True, extra="allow")

    decision: Literal["pass", "reject"] | None = None  # None: never gated (only rejected)
    failed_checks: list[str] = Field(default_factory=list)
    eval_date: str | None = None
    relative_change: float | None = None
    ci: list[float] | None = None
    version: str | None = None
    champion_version: str | None = None  # the champion it was compared with (None: none yet)
    when: str | None = None
    run_id: str | None = None
    who: str | None = None
    rejected: Rejection | None = None

    @classmethod
    def read(cls, data: Any, where: str) -> Verdict:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field_name = ".".join(str(p) for p in first["loc"]) or "(the file)"
            raise RegistryError(f"{where}: not a gate verdict ({field_name}: {first['msg']})") from None

    def to_dict(self) -> dict[str, JsonValue]:  # what verdicts/<vNNNN>.json holds
        return self.model_dump(mode="json")
