"""An alias (``champion``) and its append-only history, which *is* the alias.

Each move is an event file ``aliases/<alias>/<seq:08d>.json`` created with an exclusive create; the
highest seq is where the alias points. Moving it means creating event ``seq + 1``, so two writers
that read the same head cannot both succeed (compare-and-swap); the loser re-reads the new head and
re-checks its preconditions. A crash before the create leaves the alias where it was; after it, the
alias has moved completely.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from ranking.core.errors import RegistryError
from ranking.registry.records import AliasEvent
from ranking.registry.storage import Storage, json_bytes

log = logging.getLogger(__name__)

CHAMPION = "champion"
BASE = "base"  # the pretrained model daily recipes may warm-start from (ranker pretrain)
MAX_CAS_RETRIES = 50
_EVENT_FILE = re.compile(r"\A(\d{8})\.json\Z", re.ASCII)


class AliasConflict(RegistryError):
    """Another writer moved the alias between our read and our write (and retries ran out)."""


class Alias:
    """One alias of a registry: its history, its head, and moves by compare-and-swap."""

    def __init__(self, storage: Storage, name: str = CHAMPION) -> None:
        self.storage = storage
        self.name = name
        self.folder = f"aliases/{name}"

    def _seqs(self) -> list[int]:
        return sorted(
            int(m.group(1)) for entry in self.storage.listdir(self.folder) if (m := _EVENT_FILE.match(entry))
        )

    def _event_path(self, seq: int) -> str:
        return f"{self.folder}/{seq:08d}.json"

    def history(self) -> list[AliasEvent]:
        """Every move, oldest first. The events are numbered 1, 2, ... without gaps (each move
        creates the next seq): a missing one was deleted, and a history that silently starts
        later would make rollback and `models list` lie, so it is refused with the file named."""
        seqs = self._seqs()
        missing = missing_seqs(seqs)
        if missing:
            raise RegistryError(
                f"history of alias {self.name} in registry {self.storage.url} is damaged:"
                f" {self._event_path(missing[0])} is missing"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                + "; restore it from a backup before moving the alias"
            )
        return [AliasEvent.from_dict(self.storage.read_json(self._event_path(seq))) for seq in seqs]

    def head(self) -> tuple[int, str | None]:
        """(seq of the latest event, version it points to); (0, None) before the first move."""
        seq = max(self._seqs(), default=0)
        # a listing may lag behind a create that another writer just made: probe forward
        while self.storage.exists(self._event_path(seq + 1)):
            seq += 1
        if seq == 0:
            return 0, None
        return seq, str(self.storage.read_json(self._event_path(seq))["to"])

    def current(self) -> str | None:
        return self.head()[1]

    def move(self, make_event: Callable[[int, str | None], AliasEvent]) -> AliasEvent:
        """Compare-and-swap loop: read the head, let ``make_event(seq, current)`` check its
        preconditions and build the event, create it exclusively; on a lost race, start over."""
        self.storage.remove_orphan_temps(self.folder)
        for _ in range(MAX_CAS_RETRIES):
            seq, current = self.head()
            event = make_event(seq + 1, current)
            if self.storage.create_exclusive(self._event_path(event.seq), json_bytes(event.to_dict())):
                log.info("%s: %s -> %s (%s)", self.name, event.from_version, event.to_version, event.action)
                return event
            log.info("alias %s moved concurrently (seq %d taken); re-reading", self.name, event.seq)
        raise AliasConflict(f"alias {self.name} kept moving under us; gave up after {MAX_CAS_RETRIES} tries")


def missing_seqs(seqs: Sequence[int]) -> list[int]:
    """The seqs absent from 1..max(seqs) (a history's event files must have none)."""
    present = set(seqs)
    return [seq for seq in range(1, max(present, default=0) + 1) if seq not in present]


def rollback_target(events: Sequence[AliasEvent], alias: str = CHAMPION) -> str:
    """The version before the current one, skipping versions that were rolled back from (so
    repeated rollbacks walk back v3 -> v2 -> v1 instead of bouncing between the last two)."""
    if not events:
        raise RegistryError(f"nothing to roll back: there is no {alias}")
    current = events[-1].to_version
    rolled_back_from = {e.from_version for e in events if e.action == "rollback"}
    for event in reversed(events):
        for v in (event.to_version, event.from_version):
            if v and v != current and v not in rolled_back_from:
                return v
    earlier = sorted({e.to_version for e in events} - {current}, key=lambda v: (len(v), v))
    if not earlier:
        raise RegistryError(f"nothing to roll back to: {current} is the only version that has been {alias}")
    raise RegistryError(
        f"nothing to roll back to: every earlier {alias} ({', '.join(earlier)}) was rolled back from;"
        f" name one with --to VERSION"
    )
