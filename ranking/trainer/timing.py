"""Where step time goes: embedding-lookup time (forward + backward, including the input/output
distribution when sharded) over step time, and the part left on the critical path (exposed).

CPU: ``time.perf_counter`` around the sections; CPU kernels and gloo waits are synchronous on the
calling thread, so the timers are exact without extra synchronisation. CUDA: pairs of CUDA events
recorded on the current stream, resolved once per epoch (one synchronize), so measuring adds no
per-step sync. Sections:

- ``lookup_forward``: input dist + lookup + output dist, waited right away (sync pipeline)
- ``lookup_issue`` / ``lookup_wait``: semi-sync issues the next batch's lookup early and waits
  for it one step later; only what the main thread spends in these is exposed
- ``lookup_backward``: output-dist backward + table backward with the fused optimizer update
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

LOOKUP_SECTIONS = ("lookup_forward", "lookup_issue", "lookup_wait", "lookup_backward")


@dataclass
class SectionClock:
    enabled: bool = True
    cuda: bool = False
    totals: dict[str, float] = field(default_factory=dict)
    _events: list[tuple[str, Any, Any]] = field(default_factory=list)

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        if self.cuda:
            import torch

            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events.append((name, start, end))
            return
        t0 = time.perf_counter()
        yield
        self.totals[name] = self.totals.get(name, 0.0) + time.perf_counter() - t0

    def resolve(self) -> dict[str, float]:
        """Seconds per section so far (CUDA: synchronises once and folds the events in)."""
        if self._events:
            import torch

            torch.cuda.synchronize()
            for name, start, end in self._events:
                self.totals[name] = self.totals.get(name, 0.0) + start.elapsed_time(end) / 1000.0
            self._events.clear()
        return dict(self.totals)

    def reset(self) -> None:
        self.totals.clear()
        self._events.clear()


@dataclass(frozen=True)
class LookupShare:
    lookup_seconds: float
    exposed_seconds: float
    step_seconds: float

    @property
    def lookup_ratio(self) -> float:
        return self.lookup_seconds / self.step_seconds if self.step_seconds > 0 else float("nan")

    @property
    def exposed_lookup_ratio(self) -> float:
        return self.exposed_seconds / self.step_seconds if self.step_seconds > 0 else float("nan")


def lookup_share(totals: dict[str, float], step_seconds: float) -> LookupShare:
    """Lookup = every lookup section; exposed = what the training thread waited on. On CPU the
    lookup runs on the training thread, so only asynchronous collectives (the output all-to-all
    issued early by semi-sync) can leave the exposed part smaller."""
    fwd = totals.get("lookup_forward", 0.0)
    issue = totals.get("lookup_issue", 0.0)
    wait = totals.get("lookup_wait", 0.0)
    bwd = totals.get("lookup_backward", 0.0)
    lookup = fwd + issue + wait + bwd
    return LookupShare(lookup_seconds=lookup, exposed_seconds=lookup, step_seconds=step_seconds)
