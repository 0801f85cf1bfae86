"""What the registry stores about versions and alias moves, and who/when stamps on them."""

from __future__ import annotations

import datetime as dt
import getpass
import os
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    blessing: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["from"] = d.pop("from_version")
        d["to"] = d.pop("to_version")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AliasEvent:
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


@dataclass(frozen=True)
class VersionRecord:
    """The content of ``version.json``: what was registered, with checksums."""

    version: str
    created_at: str
    run_id: str | None
    source_run_dir: str
    files: dict[str, dict[str, Any]]  # name -> {"sha256", "bytes"}
    eval: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    who: str = "unknown"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VersionRecord:
        return cls(
            version=str(d["version"]),
            created_at=str(d["created_at"]),
            run_id=d.get("run_id"),
            source_run_dir=str(d.get("source_run_dir", "")),
            files=dict(d["files"]),
            eval=dict(d.get("eval") or {}),
            train=dict(d.get("train") or {}),
            who=str(d.get("who", "unknown")),
        )


def training_window(train_manifest: dict[str, Any]) -> tuple[dt.date, dt.date] | None:
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


def train_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    """The training summary a version record carries (``train`` in ``version.json``)."""
    out: dict[str, Any] = {k: manifest[k] for k in _TRAIN_SUMMARY_KEYS if k in manifest}
    if isinstance(out.get("epochs"), list):  # per-epoch stats: the count is what a listing needs
        out["epochs"] = len(out["epochs"])
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

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
