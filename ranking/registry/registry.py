"""The registry: immutable versions, their gate verdicts, and the champion alias.

Layout under the registry root (a local folder, or any fsspec URL such as s3://bucket/ranker):

    versions/<vNNNN>/claim.json        the id is taken (exclusive create); written first
    versions/<vNNNN>/model.pt ...       the training run's files, copied once
    versions/<vNNNN>/version.json       checksums + metadata; written LAST (the commit marker)
    verdicts/<vNNNN>.json               the gate's verdict ("blessing") and any recorded rejection
    aliases/champion/<seq:08d>.json     one file per alias move; the highest seq is the champion
    aliases/base/<seq:08d>.json         the same for the base model (``ranker pretrain``): a model
                                        trained on a range disjoint from the daily window, which
                                        the daily recipes may warm-start from

A version without ``version.json`` is incomplete (its writer crashed) and can never be promoted.
How the alias moves: ranking/registry/aliases.py; whether a verdict blesses: blessing.py.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ranking.core.atomic import atomic_dir, read_json
from ranking.core.errors import RegistryError
from ranking.core.hashing import sha256_bytes, sha256_file
from ranking.core.ids import VERSION_ID, is_version_id
from ranking.core.workspace import Workspace
from ranking.registry.aliases import BASE, CHAMPION, MAX_CAS_RETRIES, Alias, rollback_target
from ranking.registry.blessing import (
    AliasPast,
    VersionStatus,
    alias_pasts,
    blessing_digest,
    blessing_problem,
    version_status,
)
from ranking.registry.records import (
    AliasEvent,
    Blessing,
    EvalRecord,
    FileChecksum,
    Rejection,
    TrainManifestJson,
    TrainRecord,
    Verdict,
    VersionRecord,
    check_text,
    current_actor,
    train_summary,
    utc_now,
)
from ranking.registry.storage import Storage, json_bytes

log = logging.getLogger(__name__)

REGISTRY_ENV = "RANKER_REGISTRY"

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
_RECENT_VERSIONS = 50  # the versions version_of_run reads


def validate_version_id(version: str) -> str:
    """Version ids reach paths and URLs: only ``v`` + digits."""
    if not is_version_id(version):
        raise RegistryError(f"invalid version id {version!r}: expected v followed by digits, e.g. v0003")
    return version


def registry_url(ws: Workspace, url: str | None = None) -> str:
    """``--registry URL``, else $RANKER_REGISTRY, else the workspace's registry folder."""
    return url or os.environ.get(REGISTRY_ENV) or str(ws.registry)


@dataclass(frozen=True)
class Approval:
    """What a promotion's approval adds to its alias event: whether it went around the gate, and
    the verdict it was promoted on."""

    forced: bool
    blessing: Blessing


class _AlreadyChampion(Exception):
    """Raised inside the CAS loop: the version already is the champion (nothing to move)."""


class Registry:
    def __init__(self, url: str) -> None:
        self.store = Storage(url)
        self.url = url
        self.alias = Alias(self.store, CHAMPION)
        self.base_alias = Alias(self.store, BASE)

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
        if sha256_bytes(data) != rec.files[name]["sha256"]:
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
            n: FileChecksum(sha256=sha256_file(run_dir / n), bytes=(run_dir / n).stat().st_size)
            for n in names
        }

        who = current_actor()  # a bad $RANKER_ACTOR is refused before anything is written
        version = self._claim_version(run_id)
        for name in names:
            self.store.put_file(run_dir / name, f"versions/{version}/{name}")
        rec = VersionRecord(
            version=version,
            created_at=utc_now(),
            run_id=run_id,
            source_run_dir=str(run_dir.resolve()),
            files=files,
            eval=cast(EvalRecord, eval_report) if isinstance(eval_report, dict) else EvalRecord(),
            train=train_summary(cast(TrainManifestJson, manifest))
            if isinstance(manifest, dict)
            else TrainRecord(),
            who=who,
        )
        self._commit_version(rec)
        log.info("registered %s from %s in %s", version, run_dir, self.url)
        return version

    def version_of_run(self, run_id: str, model_sha256: str) -> str | None:
        """The complete version ``run_id`` registered with this model file (its sha256), if any:
        an attempt killed after registering, before its train summary was recorded, is found
        here and reused instead of trained and registered again (issue 32). Only the newest
        versions are read: a run id's attempts follow each other, and a finished run id is refused."""
        for version in reversed(self.version_ids()[-_RECENT_VERSIONS:]):
            if not self.is_complete(version):
                continue
            rec = self.record(version)
            model = rec.files.get("model.pt")
            if rec.run_id == run_id and model is not None and model.get("sha256") == model_sha256:
                return version
        return None

    def _claim_version(self, run_id: str | None) -> str:
        claim = json_bytes(
            {"claimed_at": utc_now(), "run_id": run_id, "host": socket.gethostname(), "pid": os.getpid()}
        )
        ids = self.version_ids()
        n = int(ids[-1][1:]) + 1 if ids else 1
        for _ in range(MAX_CAS_RETRIES):
            version = f"v{n:04d}"
            if self.store.create_exclusive(f"versions/{version}/claim.json", claim):
                return version
            n += 1
        raise RegistryError(f"could not allocate a version id in {self.url} (too many concurrent writers)")

    def _commit_version(self, rec: VersionRecord) -> None:
        # the commit marker: exclusive, so a version, once complete, is never rewritten
        if not self.store.create_exclusive(f"versions/{rec.version}/version.json", json_bytes(rec.to_dict())):
            raise RegistryError(f"version {rec.version} already exists; versions are immutable")

    # ---- verdicts (the gate's blessing, rejections) ------------------------------------------

    def verdict(self, version: str) -> Verdict | None:
        rel = f"verdicts/{validate_version_id(version)}.json"
        if not self.store.exists(rel):
            return None
        return Verdict.read(self.store.read_json(rel), f"{self.url}/{rel}")

    def record_verdict(self, version: str, verdict: Verdict) -> None:
        """Store the gate's verdict (the latest gate run wins; each is also in its step summary)."""
        self.record(version)
        self.store.write_bytes(f"verdicts/{version}.json", json_bytes(verdict.to_dict()))

    def record_rejection(
        self, version: str, reason: str, run_id: str | None, who: str | None = None
    ) -> Verdict:
        reason = check_text("reason", reason)
        who = check_text("who", who) if who else current_actor()
        self.record(version)
        rejection = Rejection(when=utc_now(), reason=reason, run_id=run_id, who=who)
        verdict = (self.verdict(version) or Verdict()).model_copy(update={"rejected": rejection})
        self.store.write_bytes(f"verdicts/{version}.json", json_bytes(verdict.to_dict()))
        return verdict

    # ---- the champion alias ------------------------------------------------------------------

    def alias_named(self, name: str) -> Alias:
        if name == CHAMPION:
            return self.alias
        if name == BASE:
            return self.base_alias
        raise RegistryError(f"unknown alias {name!r} (known: {CHAMPION}, {BASE})")

    def history(self, alias: str = CHAMPION) -> list[AliasEvent]:
        return self.alias_named(alias).history()

    def champion(self) -> str | None:
        return self.alias.current()

    def base(self) -> str | None:
        return self.base_alias.current()

    def set_base(
        self, version: str, *, reason: str, run_id: str | None = None, who: str | None = None
    ) -> tuple[AliasEvent | None, str | None]:
        """Point the ``base`` alias at ``version`` (no gate: a base is judged by the daily models
        trained from it). Returns (event, previous base); event is None when it already is the base."""
        reason = check_text("reason", reason, required="moving the base needs a reason")
        self.verify(version)
        return self._move(self.base_alias, version, reason=reason, run_id=run_id, who=who)

    def _move(
        self,
        alias: Alias,
        version: str,
        *,
        reason: str,
        run_id: str | None,
        who: str | None,
        approve: Callable[[str | None], Approval] | None = None,
    ) -> tuple[AliasEvent | None, str | None]:
        """Move ``alias`` to ``version`` by compare-and-swap. ``approve(current)`` runs on every
        try (the current version may have changed while we lost a race): it raises to refuse, or
        returns the event's extra fields. (None, version) when ``version`` already is the alias's."""
        reason = check_text("reason", reason)
        who = check_text("who", who) if who is not None else current_actor()

        def make_event(seq: int, current: str | None) -> AliasEvent:
            if current == version:
                raise _AlreadyChampion
            approval = approve(current) if approve is not None else None
            return AliasEvent(
                seq=seq,
                alias=alias.name,
                from_version=current,
                to_version=version,
                action="promote",
                when=utc_now(),
                run_id=run_id,
                reason=reason,
                who=who,
                forced=approval.forced if approval else False,
                blessing=approval.blessing if approval else None,
            )

        try:
            event = alias.move(make_event)
        except _AlreadyChampion:
            return None, version
        return event, event.from_version

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
        check_text("reason", reason, required="a promotion needs a reason (--reason TEXT)")
        who = check_text("who", who) if who is not None else current_actor()  # before the verify
        self.verify(version)

        def approve(current: str | None) -> Approval:
            # read on every try: a rejection or re-gate that landed while we lost a race counts
            verdict = self.verdict(version)
            problem = blessing_problem(verdict, current)
            if problem and not force:
                raise RegistryError(
                    f"refusing to promote {version}: {problem} (use --force with a reason to override)"
                )
            return Approval(forced=problem is not None, blessing=blessing_digest(verdict, problem))

        return self._move(self.alias, version, reason=reason, run_id=run_id, who=who, approve=approve)

    def rollback_target(self, alias: str = CHAMPION) -> str:
        """The alias's version before the current one, skipping versions rolled back from."""
        return rollback_target(self.history(alias), alias)

    def rollback(
        self,
        *,
        to: str | None = None,
        reason: str,
        run_id: str | None = None,
        who: str | None = None,
        alias: str = CHAMPION,
    ) -> AliasEvent:
        """Move ``alias`` back to ``to`` (default: :func:`rollback_target` of its history).

        The target is chosen from the history as it was before the (slow: a remote registry
        downloads every file) verify, so the compare-and-swap also checks that no event landed
        since: a promotion or rollback in between would make the chosen target wrong (it would
        undo a move this rollback never saw), and the rollback is refused, nothing changed."""
        reason = check_text("reason", reason, required="a rollback needs a reason (--reason TEXT)")
        who = check_text("who", who) if who is not None else current_actor()
        moved = self.alias_named(alias)
        seen = moved.history()
        seen_seq = seen[-1].seq if seen else 0
        target = validate_version_id(to) if to else rollback_target(seen, alias)
        self.verify(target)

        def make_event(seq: int, current: str | None) -> AliasEvent:
            if current is None:
                raise RegistryError(f"nothing to roll back: there is no {alias}")
            if seq != seen_seq + 1:
                raise RegistryError(
                    f"refusing to roll back {alias} to {target}: it moved while this rollback was"
                    f" checking {target} (it was {seen[-1].to_version if seen else 'unset'} at"
                    f" event #{seen_seq}, it is {current} at event #{seq - 1}); nothing changed,"
                    " look at `ranker models list` and run the rollback again"
                )
            if current == target:
                raise RegistryError(f"{target} already is the {alias}")
            return AliasEvent(
                seq=seq,
                alias=alias,
                from_version=current,
                to_version=target,
                action="rollback",
                when=utc_now(),
                run_id=run_id,
                reason=reason,
                who=who,
            )

        return moved.move(make_event)

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
        with atomic_dir(target) as tmp:
            for name, meta in rec.files.items():
                self.store.get_file(f"versions/{version}/{name}", tmp / name)
                if sha256_file(tmp / name) != meta["sha256"]:
                    raise RegistryError(
                        f"checksum mismatch: {version}/{name} differs from when it was registered"
                    )
        return target

    # ---- listing -----------------------------------------------------------------------------

    def alias_pasts(self) -> dict[str, AliasPast]:
        """Each version the champion or base alias ever pointed to, with how it left them."""
        return alias_pasts(self.history(CHAMPION), self.history(BASE))

    def status(
        self, version: str, champion: str | None = None, pasts: dict[str, AliasPast] | None = None
    ) -> VersionStatus:
        """What `models list` calls ``version`` (``pasts``: :meth:`alias_pasts`, read once for a
        listing; read here when not given)."""
        complete = self.is_complete(version)
        if complete and version != champion and pasts is None:
            pasts = self.alias_pasts()
        return version_status(
            complete=complete,
            is_champion=version == champion,
            verdict=self.verdict(version) if complete and version != champion else None,
            champion=champion,
            past=(pasts or {}).get(version),
        )

    def trained_for(self, version: str) -> str | None:
        """The window end (= eval day) a version was trained for, when its manifest says."""
        end = self.record(version).train.get("train_end")
        return str(end) if end else None


# --------------------------------------------------------------------------------------------
# the interface the trainer codes against
# --------------------------------------------------------------------------------------------


def cache_dir(ws: Workspace) -> Path:
    """Local copies of remote registry versions."""
    return ws.root / "cache" / "registry"


def champion_checkpoint(ws: Workspace, registry: str | None = None) -> Path | None:
    """Local path of the champion's ``model.pt`` (with ``model_config.json`` beside it), checked
    against its checksums and downloaded from a remote registry if needed; None without a champion."""
    found = alias_checkpoint(ws, CHAMPION, registry)
    return found[1] if found else None


def alias_checkpoint(ws: Workspace, alias: str, registry: str | None = None) -> tuple[str, Path] | None:
    """(version, local ``model.pt``) the alias points to, verified; None while it points nowhere."""
    reg = Registry.for_workspace(ws, registry)
    version = reg.alias_named(alias).current()
    if version is None:
        return None
    return version, reg.local_dir(version, cache_dir(ws)) / "model.pt"


def register_run(ws: Workspace, run_dir: Path, run_id: str | None, registry: str | None = None) -> str:
    """Register a finished training run folder as a new (candidate) version; returns its id."""
    return Registry.for_workspace(ws, registry).register(Path(run_dir), run_id)
