"""The asynchronous-collective spans behind the lookup share: a wait settles every span in flight,
including one whose completion callback stamped a time after the wait had returned."""

from __future__ import annotations

from ranking.trainer.distributed.timing import _AsyncSpans


class _Future:
    def __init__(self) -> None:
        self.callbacks: list[object] = []

    def add_done_callback(self, fn: object) -> None:
        self.callbacks.append(fn)


class _Work:
    def __init__(self) -> None:
        self.future = _Future()

    def get_future(self) -> _Future:
        return self.future


def test_a_wait_ends_every_span_it_waited_for_at_the_latest_when_it_returned() -> None:
    spans = _AsyncSpans()
    late, open_ = _Work(), _Work()
    spans.start(late, issued=1.0)
    spans.start(open_, issued=1.5)
    spans._complete(0, 2.7)  # the callback ran (and stamped its time) after the wait returned at 2.5
    spans.settle(2.5)
    done, earliest = spans.take()
    assert sorted(done) == [(1.0, 2.5), (1.5, 2.5)]
    assert earliest == float("inf")


def test_spans_that_ended_before_the_wait_keep_their_end() -> None:
    spans = _AsyncSpans()
    spans.start(_Work(), issued=1.0)
    spans._complete(0, 1.2)
    spans.settle(2.0)
    assert spans.take() == ([(1.0, 1.2)], float("inf"))
