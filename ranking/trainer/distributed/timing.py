"""Where step time goes: embedding-lookup time and the part of it left on the critical path.

Both are measured as the length of a union of time intervals:

- **lookup** = every interval in which lookup work ran, wherever it ran: the training thread's
  lookup sections and, on top, the lookup's asynchronous parts (a collective issued with
  ``async_op=True`` from its issue to its completion; on CUDA, lookup work on a side stream);
- **exposed** = only the intervals in which the training thread (CPU) or the training stream
  (CUDA) was busy with or blocked on the lookup: its lookup sections.

Exposed is therefore never computed from lookup; the two are equal exactly when nothing of the
lookup ran outside the training thread's own sections (the sync pipeline, or one process on CPU,
where no collective runs), and exposed is smaller by what ran hidden under other work.

Sections on the training thread / stream:

- ``lookup_forward``: input dist + lookup + output dist, waited right away (sync pipeline)
- ``lookup_issue`` / ``lookup_wait``: semi-sync issues the next batch's lookup early and waits for
  it one step later; ``input_dist`` (torchrec's pipeline: the input all-to-all)
- ``lookup_backward``: output-dist backward + table backward with the fused optimizer update

CPU: ``time.perf_counter`` around the sections (CPU kernels and gloo waits are synchronous on the
calling thread). Collectives that torchrec issues asynchronously inside a tracked section
(``track_async``: the output all-to-all / reduce-scatter of the lookup, which gloo runs on its
own threads) are timed from the call to their ``Work`` future's completion; a section that
``settles`` (the wait) closes whatever is still open at its end, since the wait has returned.

CUDA: pairs of CUDA events recorded on the stream the section's work runs on (the current stream
by default; torchrec's ``data_dist`` stream for the input dist), placed on one GPU timeline by
their elapsed time from a reference event recorded at ``reset``; intervals on another stream than
the training stream count as lookup, not as exposed. Events are resolved in batches (one
``synchronize`` per :data:`CUDA_FOLD_EVENTS` sections and one at the end of the epoch), so
measuring adds no per-step sync. Not counted on CUDA: the hidden part of an NCCL collective on
NCCL's internal stream (the wait for it on the training stream is counted, as exposed), and host
stalls inside torchrec's data-dist calls (``torch.profiler`` shows both).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

LOOKUP_SECTIONS = ("lookup_forward", "lookup_issue", "lookup_wait", "input_dist", "lookup_backward")
STEP_SECTIONS = ("dense_forward", "dense_backward", "dense_optimizer")  # lookup=False: the rest
ASYNC_SECTION = "lookup_async"  # per-section totals: the asynchronous collectives' own durations
# collectives torchrec's input/output dists issue with async_op=True (torchrec calls them as
# ``torch.distributed.<name>``)
ASYNC_COLLECTIVES = (
    "all_to_all_single",
    "all_to_all",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_gather",
    "all_gather_into_tensor",
)
FOLD_INTERVALS = 4096  # fold the interval lists when they grow past this (memory stays flat)
CUDA_FOLD_EVENTS = 4096


class IntervalUnion:
    """Length of a union of [start, end] intervals, folded as it grows: intervals that end
    before ``cutoff`` (no interval added later can start before it) are summed and dropped."""

    def __init__(self) -> None:
        self.total = 0.0
        self._items: list[tuple[float, float]] = []

    def add(self, start: float, end: float) -> None:
        if end > start:
            self._items.append((start, end))

    def __len__(self) -> int:
        return len(self._items)

    def fold(self, cutoff: float = float("inf")) -> float:
        merged: list[tuple[float, float]] = []
        for start, end in sorted(self._items):
            if merged and start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        kept: list[tuple[float, float]] = []
        for start, end in merged:
            if end <= cutoff:
                self.total += end - start
            else:
                kept.append((start, end))
        self._items = kept
        return self.total + sum(end - start for start, end in kept)


class _AsyncSpans:
    """Asynchronous collectives issued inside tracked sections, from their issue to their
    completion (a callback on the ``Work`` future, run by the backend's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, float] = {}
        self._done: list[tuple[float, float]] = []
        self._next = 0

    def start(self, work: Any, issued: float) -> None:
        try:
            future = work.get_future()
        except (AttributeError, RuntimeError):  # a backend without futures: not measurable
            return
        with self._lock:
            token, self._next = self._next, self._next + 1
            self._open[token] = issued
        future.add_done_callback(lambda _f, token=token: self._complete(token, time.perf_counter()))

    def _complete(self, token: int, end: float) -> None:
        with self._lock:
            start = self._open.pop(token, None)
            if start is not None:
                self._done.append((start, end))

    def settle(self, end: float) -> None:
        """The training thread has waited: whatever is still open completed by ``end``, and so
        did what completed already (a completion callback can run, and take its timestamp, a
        little after the wait it ended has returned)."""
        with self._lock:
            self._done = [(start, min(stop, end)) for start, stop in self._done]
            self._done.extend((start, end) for start in self._open.values())
            self._open.clear()

    def take(self) -> tuple[list[tuple[float, float]], float]:
        """(completed spans, the earliest start still open or +inf)"""
        with self._lock:
            done, self._done = self._done, []
            earliest = min(self._open.values(), default=float("inf"))
        return done, earliest

    def clear(self) -> None:
        with self._lock:
            self._open.clear()
            self._done.clear()


def _tracking(spans: _AsyncSpans, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        # the collective is under way from the call, not from when the call returns
        issued = time.perf_counter()
        work = original(*args, **kwargs)
        if kwargs.get("async_op") and work is not None:
            spans.start(work, issued)
        return work

    return call


@contextlib.contextmanager
def _async_collectives_tracked(spans: _AsyncSpans) -> Iterator[None]:
    import torch.distributed as dist

    saved = {name: getattr(dist, name) for name in ASYNC_COLLECTIVES if hasattr(dist, name)}
    for name, original in saved.items():
        setattr(dist, name, _tracking(spans, original))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(dist, name, original)


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


@dataclass
class SectionClock:
    enabled: bool = True
    cuda: bool = False
    totals: dict[str, float] = field(default_factory=dict)
    _lookup: IntervalUnion = field(default_factory=IntervalUnion)
    _exposed: IntervalUnion = field(default_factory=IntervalUnion)
    _spans: _AsyncSpans = field(default_factory=_AsyncSpans)
    _events: list[tuple[str, Any, Any, str]] = field(default_factory=list)  # kind: exposed|hidden|other
    _reference: Any = None

    @contextlib.contextmanager
    def section(
        self,
        name: str,
        stream: Any = None,
        track_async: bool = False,
        settles: bool = False,
        lookup: bool = True,
    ) -> Iterator[None]:
        """Time a lookup section. ``stream``: CUDA stream the section's work is enqueued on
        (default: the current stream = the training stream; another stream's intervals are not
        exposed). ``track_async``: time the asynchronous collectives issued inside it (CPU).
        ``settles``: the section waits for every lookup in flight (CPU). ``lookup=False``: a
        section of the rest of the step (dense forward, backward, optimizer), in the per-section
        totals only."""
        if not self.enabled:
            yield
            return
        if self.cuda:
            with self._cuda_section(name, stream, lookup):
                yield
            return
        if not lookup:
            t0 = time.perf_counter()
            yield
            self.totals[name] = self.totals.get(name, 0.0) + time.perf_counter() - t0
            return
        tracked = _async_collectives_tracked(self._spans) if track_async else contextlib.nullcontext()
        t0 = time.perf_counter()
        with tracked:
            yield
        t1 = time.perf_counter()
        if settles:
            self._spans.settle(t1)
        self.totals[name] = self.totals.get(name, 0.0) + t1 - t0
        self._lookup.add(t0, t1)
        self._exposed.add(t0, t1)
        if len(self._lookup) > FOLD_INTERVALS:
            self._fold_cpu(t1)

    @contextlib.contextmanager
    def _cuda_section(self, name: str, stream: Any, lookup: bool) -> Iterator[None]:
        import torch

        current = torch.cuda.current_stream()
        on = stream if stream is not None else current
        if self._reference is None:
            self._reference = torch.cuda.Event(enable_timing=True)
            self._reference.record(current)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(on)
        yield
        end.record(on)
        self._events.append(
            (name, start, end, "other" if not lookup else "exposed" if on == current else "hidden")
        )
        if len(self._events) > CUDA_FOLD_EVENTS:
            self._fold_cuda()

    def _fold_cpu(self, now: float) -> None:
        done, earliest_open = self._spans.take()
        for start, end in done:
            self.totals[ASYNC_SECTION] = self.totals.get(ASYNC_SECTION, 0.0) + end - start
            self._lookup.add(start, end)
        cutoff = min(now, earliest_open)  # nothing added later starts before it
        self._lookup.fold(cutoff)
        self._exposed.fold(cutoff)

    def _fold_cuda(self) -> None:
        import torch

        torch.cuda.synchronize()
        for name, start, end, kind in self._events:
            begin = self._reference.elapsed_time(start) / 1000.0
            finish = self._reference.elapsed_time(end) / 1000.0
            self.totals[name] = self.totals.get(name, 0.0) + finish - begin
            if kind != "other":
                self._lookup.add(begin, finish)
            if kind == "exposed":
                self._exposed.add(begin, finish)
        self._events.clear()
        self._lookup.fold(float("inf"))  # every event is complete after the sync
        self._exposed.fold(float("inf"))

    def resolve(self) -> dict[str, float]:
        """Seconds per section so far (CUDA: synchronises once and folds the events in)."""
        if self._events:
            self._fold_cuda()
        if not self.cuda:
            self._spans.settle(time.perf_counter())
            self._fold_cpu(float("inf"))
        return dict(self.totals)

    def share(self, step_seconds: float) -> LookupShare:
        """Lookup and exposed seconds (the two unions) over ``step_seconds``."""
        self.resolve()
        return LookupShare(
            lookup_seconds=self._lookup.fold(),
            exposed_seconds=self._exposed.fold(),
            step_seconds=step_seconds,
        )

    def reset(self) -> None:
        self.totals.clear()
        self._events.clear()
        self._spans.clear()
        self._lookup = IntervalUnion()
        self._exposed = IntervalUnion()
        self._reference = None
