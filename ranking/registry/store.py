"""Model registry: immutable versions, a `champion` alias with an append-only history, rollback.

Layout under the registry root (a local folder, or any fsspec URL such as s3://bucket/ranker):

    versions/<vNNNN>/claim.json        the id is taken (exclusive create); written first
    versions/<vNNNN>/model.pt ...       the training run's files, copied once
    versions/<vNNNN>/version.json       checksums + metadata; written LAST (the commit marker)
    verdicts/<vNNNN>.json               the gate's verdict ("blessing") and any recorded rejection
    aliases/champion/<seq:08d>.json     one file per alias move; the highest seq is the champion

A version without ``version.json`` is incomplete (its writer crashed) and can never be promoted.
The alias history *is* the alias: moving it means creating event ``seq + 1`` with an exclusive
create, so two promoters that read the same state cannot both succeed (compare-and-swap); the loser
re-reads the new state and re-checks its preconditions. A crash before that create leaves the old
champion serving; a crash after it has moved the alias completely.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_path, atomic_write_bytes, fsync_dir, read_json
from ranking.core.errors import RegistryError
from ranking.core.hashing import sha256_file
from ranking.core.ids import VERSION_ID
from ranking.core.workspace import Workspace

log = logging.getLogger(__name__)

REGISTRY_ENV = "RANKER_REGISTRY"
ACTOR_ENV = "RANKER_ACTOR"
CHAMPION = "champion"

# files a training run folder must hold to become a version (docs/architecture.md)
REQUIRED_FILES: tuple[str, ...] = (
    "model.pt",
    "model_config.json",
    "train_manifest.json",
    "eval.json",
    "eval_scores.parquet",
)
# effective_config.json: the pipeline config the run was trained with and each value's source
OPTIONAL_FILES: tuple[str, ...] = ("curve.png", "effective_config.json")

_EVENT_FILE = re.compile(r"^(\d{8})\.json$")
_MAX_CAS_RETRIES = 50
_CHUNK = 1 << 20


class AliasConflict(RegistryError):
    """Another writer moved the alias between our read and our write (and retries ran out)."""


def validate_version_id(version: str) -> str:
    """Version ids reach paths and URLs: only ``v`` + digits."""
    if not isinstance(version, str) or not VERSION_ID.fullmatch(version):
        raise RegistryError(f"invalid version id {version!r}: expected v followed by digits, e.g. v0003")
    return version


def current_actor() -> str:
    """Who is acting: $RANKER_ACTOR (set by Airflow to the triggering user), else the OS user."""
    actor = os.environ.get(ACTOR_ENV)
    if actor:
        return actor
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # containers without a passwd entry
        return "unknown"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()


# --------------------------------------------------------------------------------------------
# storage: the few operations the registry needs, local (os-level atomicity) or any fsspec fs
# --------------------------------------------------------------------------------------------


class _Store:
    """Root-relative file operations. Writes never leave a half-written file under its final name."""

    def __init__(self, url: str) -> None:
        from fsspec.core import url_to_fs
        from fsspec.implementations.local import LocalFileSystem

        self.url = url
        self.fs, root = url_to_fs(url)
        self.local = isinstance(self.fs, LocalFileSystem)
        self.root = root.rstrip("/") or "/"

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.root != "/" else f"/{rel}"

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def listdir(self, rel: str) -> list[str]:
        """Base names of the entries of a folder ([] when it does not exist)."""
        self.fs.invalidate_cache(self.path(rel))  # s3fs/gcsfs cache listings; the alias needs fresh ones
        try:
            entries = self.fs.ls(self.path(rel), detail=False)
        except FileNotFoundError:
            return []
        return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def read_bytes(self, rel: str) -> bytes:
        try:
            return bytes(self.fs.cat_file(self.path(rel)))
        except FileNotFoundError:
            raise RegistryError(f"missing in registry {self.url}: {rel}") from None

    def read_json(self, rel: str) -> Any:
        data = self.read_bytes(rel)
        try:
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise RegistryError(f"corrupt JSON in registry {self.url}: {rel}: {exc}") from None

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace ``rel`` atomically."""
        if self.local:
            atomic_write_bytes(self.path(rel), data)
        else:  # object stores publish an object only when its upload completes
            self.fs.pipe_file(self.path(rel), data)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` with ``data`` only if it does not exist; False if it already does.

        Local: write a temp file, then hard-link it to the final name (link(2) fails if the name
        exists, and the content is complete before the name appears). Other filesystems: mode "xb"
        (s3fs: If-None-Match, gcsfs: ifGenerationMatch=0, memory: checked create).
        """
        target = self.path(rel)
        if self.local:
            parent = Path(target).parent
            parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.link(tmp, target)
                fsync_dir(parent)  # the new name must survive a power cut, not just the bytes
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        try:
            with self.fs.open(target, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False

    def put_file(self, local_src: Path, rel: str) -> None:
        target = self.path(rel)
        if self.local:
            with atomic_path(target) as tmp:
                shutil.copyfile(local_src, tmp)
        else:
            self.fs.put_file(str(local_src), target)

    def get_file(self, rel: str, local_dst: Path) -> None:
        if self.local:
            shutil.copyfile(self.path(rel), local_dst)
        else:
            self.fs.get_file(self.path(rel), str(local_dst))

    def sha256(self, rel: str) -> str:
        digest = hashlib.sha256()
        with self.fs.open(self.path(rel), "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# records
# --------------------------------------------------------------------------------------------


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
    """The training days ``[start, end)`` a training manifest says the model saw, if it says.

    Accepts the shapes the trainer may write: ``window: {end, days}`` (the window manifest's
    fields), top-level ``end``/``days`` or ``window_end``/``window_days``, or ``train_dates``.
    """
    window = train_manifest.get("window")
    candidates: list[dict[str, Any]] = []
    if isinstance(window, dict):
        candidates.append(window)
        if isinstance(window.get("manifest"), dict):
            candidates.append(window["manifest"])
    candidates.append(train_manifest)
    for src in candidates:
        end = src.get("end", src.get("window_end"))
        days = src.get("days", src.get("window_days"))
        if end is not None and days is not None:
            try:
                end_date = dt.date.fromisoformat(str(end))
                return end_date - dt.timedelta(days=int(days)), end_date
            except (TypeError, ValueError):
                return None
    dates = train_manifest.get("train_dates")
    if isinstance(dates, list) and dates:
        try:
            parsed = sorted(dt.date.fromisoformat(str(d)) for d in dates)
        except ValueError:
            return None
        return parsed[0], parsed[-1] + dt.timedelta(days=1)
    return None


def _train_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    """The fields of a training manifest worth showing in `models list` without opening it."""
    keys = ("schedule", "epochs", "seed", "pipeline", "window_id", "feature_version", "code_version")
    out: dict[str, Any] = {k: manifest[k] for k in keys if k in manifest}
    if isinstance(out.get("epochs"), list):  # per-epoch stats: the count is what a listing needs
        out["epochs"] = len(out["epochs"])
    window = training_window(manifest)
    if window is not None:
        out["train_start"], out["train_end"] = window[0].isoformat(), window[1].isoformat()
    warm = manifest.get("warm_start")
    if warm is not None:
        out["warm_start"] = warm
    return out


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------


def registry_url(ws: Workspace, url: str | None = None) -> str:
    """``--registry URL``, else $RANKER_REGISTRY, else the workspace's registry folder."""
    return url or os.environ.get(REGISTRY_ENV) or str(ws.registry)


class Registry:
    def __init__(self, url: str) -> None:
        self.store = _Store(url)
        self.url = url

    @classmethod
    def for_workspace(cls, ws: Workspace, url: str | None = None) -> Registry:
        return cls(registry_url(ws, url))

    # ---- versions ---------------------------------------------------------------------------

    def version_ids(self) -> list[str]:
        """Every version id that has been claimed (complete or not), oldest first."""
        ids = [name for name in self.store.listdir("versions") if VERSION_ID.fullmatch(name)]
        return sorted(ids, key=lambda v: int(v[1:]))

    def is_complete(self, version: str) -> bool:
        return self.store.exists(f"versions/{validate_version_id(version)}/version.json")

    def record(self, version: str) -> VersionRecord:
        validate_version_id(version)
        if not self.store.exists(f"versions/{version}/claim.json"):
            raise RegistryError(f"unknown version {version} in registry {self.url}")
        if not self.is_complete(version):
            raise RegistryError(
                f"version {version} is incomplete (its registration did not finish); it cannot be used"
            )
        return VersionRecord.from_dict(self.store.read_json(f"versions/{version}/version.json"))

    def read_file(self, version: str, name: str) -> bytes:
        """A version file's bytes, checked against the recorded checksum."""
        rec = self.record(version)
        if name not in rec.files:
            raise RegistryError(f"version {version} has no file {name!r}")
        data = self.store.read_bytes(f"versions/{version}/{name}")
        if hashlib.sha256(data).hexdigest() != rec.files[name]["sha256"]:
            raise RegistryError(f"checksum mismatch: {version}/{name} differs from when it was registered")
        return data

    def verify(self, version: str) -> VersionRecord:
        """Recompute every file's checksum; RegistryError naming the first file that differs."""
        rec = self.record(version)
        for name, meta in sorted(rec.files.items()):
            rel = f"versions/{version}/{name}"
            if not self.store.exists(rel):
                raise RegistryError(f"version {version} is missing {name}")
            if self.store.sha256(rel) != meta["sha256"]:
                raise RegistryError(
                    f"checksum mismatch: {version}/{name} differs from when it was registered"
                )
        return rec

    def register(self, run_dir: Path, run_id: str | None = None) -> str:
        """Copy a finished training run into a new immutable version; return its id."""
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise RegistryError(f"training run folder not found: {run_dir}")
        missing = [n for n in REQUIRED_FILES if not (run_dir / n).is_file()]
        if missing:
            raise RegistryError(f"training run {run_dir} is not finished: missing {', '.join(missing)}")
        names = [*REQUIRED_FILES, *(n for n in OPTIONAL_FILES if (run_dir / n).is_file())]
        try:
            manifest = read_json(run_dir / "train_manifest.json")
            eval_report = read_json(run_dir / "eval.json")
        except (OSError, json.JSONDecodeError) as exc:
            raise RegistryError(f"unreadable training run metadata in {run_dir}: {exc}") from None
        files = {
            n: {"sha256": sha256_file(run_dir / n), "bytes": (run_dir / n).stat().st_size} for n in names
        }

        version = self._claim_version(run_id)
        for name in names:
            self.store.put_file(run_dir / name, f"versions/{version}/{name}")
        rec = VersionRecord(
            version=version,
            created_at=_now(),
            run_id=run_id,
            source_run_dir=str(run_dir.resolve()),
            files=files,
            eval=eval_report if isinstance(eval_report, dict) else {},
            train=_train_summary(manifest) if isinstance(manifest, dict) else {},
            who=current_actor(),
        )
        self._commit_version(rec)
        log.info("registered %s from %s in %s", version, run_dir, self.url)
        return version

    def _claim_version(self, run_id: str | None) -> str:
        claim = _json_bytes(
            {"claimed_at": _now(), "run_id": run_id, "host": socket.gethostname(), "pid": os.getpid()}
        )
        ids = self.version_ids()
        n = int(ids[-1][1:]) + 1 if ids else 1
        for _ in range(_MAX_CAS_RETRIES):
            version = f"v{n:04d}"
            if self.store.create_exclusive(f"versions/{version}/claim.json", claim):
                return version
            n += 1
        raise RegistryError(f"could not allocate a version id in {self.url} (too many concurrent writers)")

    def _commit_version(self, rec: VersionRecord) -> None:
        # the commit marker: exclusive, so a version, once complete, is never rewritten
        if not self.store.create_exclusive(
            f"versions/{rec.version}/version.json", _json_bytes(rec.to_dict())
        ):
            raise RegistryError(f"version {rec.version} already exists; versions are immutable")

    # ---- verdicts (the gate's blessing, rejections) ------------------------------------------

    def verdict(self, version: str) -> dict[str, Any] | None:
        rel = f"verdicts/{validate_version_id(version)}.json"
        return self.store.read_json(rel) if self.store.exists(rel) else None

    def record_verdict(self, version: str, verdict: dict[str, Any]) -> None:
        """Store the gate's verdict (the latest gate run wins; each is also in its step summary)."""
        self.record(version)
        self.store.write_bytes(f"verdicts/{version}.json", _json_bytes(verdict))

    def record_rejection(
        self, version: str, reason: str, run_id: str | None, who: str | None = None
    ) -> dict[str, Any]:
        self.record(version)
        verdict = dict(self.verdict(version) or {})
        verdict["rejected"] = {
            "when": _now(),
            "reason": reason,
            "run_id": run_id,
            "who": who or current_actor(),
        }
        self.store.write_bytes(f"verdicts/{version}.json", _json_bytes(verdict))
        return verdict

    # ---- the alias and its history -----------------------------------------------------------

    def history(self, alias: str = CHAMPION) -> list[AliasEvent]:
        folder = f"aliases/{alias}"
        seqs = sorted(
            int(m.group(1)) for name in self.store.listdir(folder) if (m := _EVENT_FILE.match(name))
        )
        return [AliasEvent.from_dict(self.store.read_json(f"{folder}/{seq:08d}.json")) for seq in seqs]

    def _head(self, alias: str = CHAMPION) -> tuple[int, str | None]:
        """(seq of the latest event, version it points to); (0, None) before the first promotion."""
        folder = f"aliases/{alias}"
        seqs = [int(m.group(1)) for name in self.store.listdir(folder) if (m := _EVENT_FILE.match(name))]
        seq = max(seqs, default=0)
        # a listing may lag behind a create that another writer just made: probe forward
        while self.store.exists(f"{folder}/{seq + 1:08d}.json"):
            seq += 1
        if seq == 0:
            return 0, None
        return seq, str(self.store.read_json(f"{folder}/{seq:08d}.json")["to"])

    def champion(self) -> str | None:
        return self._head()[1]

    def _move(self, make_event: Callable[[int, str | None], AliasEvent], alias: str = CHAMPION) -> AliasEvent:
        """Compare-and-swap loop: read the head, let ``make_event(seq, current)`` check its
        preconditions and build the event, create it exclusively; on a lost race, start over."""
        for _ in range(_MAX_CAS_RETRIES):
            seq, current = self._head(alias)
            event = make_event(seq + 1, current)
            if self.store.create_exclusive(
                f"aliases/{alias}/{event.seq:08d}.json", _json_bytes(event.to_dict())
            ):
                log.info("%s: %s -> %s (%s)", alias, event.from_version, event.to_version, event.action)
                return event
            log.info("alias %s moved concurrently (seq %d taken); re-reading", alias, event.seq)
        raise AliasConflict(f"alias {alias} kept moving under us; gave up after {_MAX_CAS_RETRIES} tries")

    def promote(
        self,
        version: str,
        *,
        reason: str,
        force: bool = False,
        run_id: str | None = None,
        who: str | None = None,
    ) -> tuple[AliasEvent | None, str | None]:
        """Make ``version`` the champion. Returns (event, previous champion); event is None when
        the version already is the champion (a rerun is a no-op, never a second promotion)."""
        if not reason or not reason.strip():
            raise RegistryError("a promotion needs a reason (--reason TEXT)")
        self.verify(version)
        verdict = self.verdict(version)
        who = who or current_actor()

        def make_event(seq: int, current: str | None) -> AliasEvent:
            if current == version:
                raise _AlreadyChampion
            problem = blessing_problem(verdict, current)
            if problem and not force:
                raise RegistryError(
                    f"refusing to promote {version}: {problem} (use --force with a reason to override)"
                )
            return AliasEvent(
                seq=seq,
                alias=CHAMPION,
                from_version=current,
                to_version=version,
                action="promote",
                when=_now(),
                run_id=run_id,
                reason=reason.strip(),
                who=who,
                forced=problem is not None,
                blessing=_blessing_digest(verdict, problem),
            )

        try:
            event = self._move(make_event)
        except _AlreadyChampion:
            return None, version
        return event, event.from_version

    def rollback_target(self) -> str:
        """The champion before the current one, skipping versions that were rolled back from."""
        events = self.history()
        if not events:
            raise RegistryError("nothing to roll back: there is no champion")
        current = events[-1].to_version
        rolled_back_from = {e.from_version for e in events if e.action == "rollback"}
        for event in reversed(events):
            for v in (event.to_version, event.from_version):
                if v and v != current and v not in rolled_back_from:
                    return v
        raise RegistryError(f"nothing to roll back to: {current} is the only version that has been champion")

    def rollback(
        self, *, to: str | None = None, reason: str, run_id: str | None = None, who: str | None = None
    ) -> AliasEvent:
        if not reason or not reason.strip():
            raise RegistryError("a rollback needs a reason (--reason TEXT)")
        target = validate_version_id(to) if to else self.rollback_target()
        self.verify(target)
        who = who or current_actor()

        def make_event(seq: int, current: str | None) -> AliasEvent:
            if current is None:
                raise RegistryError("nothing to roll back: there is no champion")
            if current == target:
                raise RegistryError(f"{target} already is the champion")
            return AliasEvent(
                seq=seq,
                alias=CHAMPION,
                from_version=current,
                to_version=target,
                action="rollback",
                when=_now(),
                run_id=run_id,
                reason=reason.strip(),
                who=who,
            )

        return self._move(make_event)

    # ---- local copies ------------------------------------------------------------------------

    def local_dir(self, version: str, cache_root: Path) -> Path:
        """A local folder holding the version's files, verified. Local registries are used in
        place; remote ones are downloaded once into ``cache_root/<version>`` (atomically)."""
        rec = self.record(version)
        if self.store.local:
            self.verify(version)
            return Path(self.store.path(f"versions/{version}"))
        target = cache_root / version
        if target.is_dir() and all(
            (target / n).is_file() and sha256_file(target / n) == m["sha256"] for n, m in rec.files.items()
        ):
            return target
        from ranking.core.atomic import atomic_dir

        with atomic_dir(target) as tmp:
            for name, meta in rec.files.items():
                self.store.get_file(f"versions/{version}/{name}", tmp / name)
                if sha256_file(tmp / name) != meta["sha256"]:
                    raise RegistryError(
                        f"checksum mismatch: {version}/{name} differs from when it was registered"
                    )
        return target

    # ---- listing -----------------------------------------------------------------------------

    def status(self, version: str, champion: str | None = None) -> str:
        if not self.is_complete(version):
            return "incomplete"
        if version == champion:
            return "champion"
        verdict = self.verdict(version) or {}
        if verdict.get("rejected"):
            return "rejected"
        if verdict.get("decision") == "pass":
            return "blessed"
        if verdict.get("decision") == "reject":
            return "gate-rejected"
        return "candidate"


class _AlreadyChampion(Exception):
    """Raised inside the CAS loop: the version already is the champion (nothing to move)."""


def blessing_problem(verdict: dict[str, Any] | None, current_champion: str | None) -> str | None:
    """Why a verdict does not bless promotion over ``current_champion`` (None when it does)."""
    if not verdict or "decision" not in verdict:
        return "it has not been through the gate"
    if verdict.get("rejected"):
        return "it was rejected"
    if verdict["decision"] != "pass":
        failed = ", ".join(verdict.get("failed_checks") or []) or "see its gate report"
        return f"the gate rejected it ({failed})"
    gated_against = verdict.get("champion_version")
    if gated_against != current_champion:
        return (
            f"its gate verdict compared it with {gated_against or 'no champion'}, "
            f"but the champion is now {current_champion or 'none'}: run the gate again"
        )
    return None


def _blessing_digest(verdict: dict[str, Any] | None, problem: str | None) -> dict[str, Any]:
    if not verdict:
        return {"decision": None, "problem": problem}
    keys = ("decision", "champion_version", "eval_date", "relative_change", "ci", "failed_checks", "run_id")
    out = {k: verdict.get(k) for k in keys}
    out["problem"] = problem
    return out


# --------------------------------------------------------------------------------------------
# the interface the trainer codes against
# --------------------------------------------------------------------------------------------


def cache_dir(ws: Workspace) -> Path:
    """Local copies of remote registry versions."""
    return ws.root / "cache" / "registry"


def champion_checkpoint(ws: Workspace, registry: str | None = None) -> Path | None:
    """Local path of the champion's ``model.pt`` (with ``model_config.json`` beside it), checked
    against its checksums and downloaded from a remote registry if needed; None without a champion."""
    reg = Registry.for_workspace(ws, registry)
    version = reg.champion()
    if version is None:
        return None
    return reg.local_dir(version, cache_dir(ws)) / "model.pt"


def register_run(ws: Workspace, run_dir: Path, run_id: str | None, registry: str | None = None) -> str:
    """Register a finished training run folder as a new (candidate) version; returns its id."""
    return Registry.for_workspace(ws, registry).register(Path(run_dir), run_id)
