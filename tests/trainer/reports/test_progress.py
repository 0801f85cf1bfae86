"""Progress: JSON lines when not a TTY, a tqdm bar with samples/s on a TTY; plot; timing maths."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ranking.core.summaries import EpochSummary, EvalSummary
from ranking.trainer.distributed.timing import IntervalUnion, LookupShare, SectionClock
from ranking.trainer.reports.plots import plot_curve
from ranking.trainer.reports.progress import EpochProgress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_logs_json_lines_when_not_a_tty() -> None:
    out = io.StringIO()
    p = EpochProgress(2, 3, "joint", steps=4, rows=400, stream=out, interval_s=0.0)
    for _ in range(4):
        p.update(100, 100 * 0.5)
    p.close(loss=0.5)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["train_progress"] * 4 + ["epoch_end"]
    last = events[3]
    assert last["epoch"] == 2 and last["phase"] == "joint" and last["samples"] == 400 and last["steps"] == 4
    assert last["loss"] == 0.5 and last["samples_per_second"] > 0


def test_progress_draws_a_bar_on_a_tty() -> None:
    out = _Tty()
    p = EpochProgress(1, 3, "frozen", steps=2, rows=200, stream=out)
    p.update(100, 40.0)
    p.update(100, 40.0)
    p.close(loss=0.4)
    text = out.getvalue()
    assert "epoch 1/3 [frozen]" in text and "sample/s" in text and "200/200" in text


def test_progress_can_be_silent() -> None:
    out = io.StringIO()
    p = EpochProgress(1, 1, "joint", 1, 10, enabled=False, stream=out, interval_s=0.0)
    p.update(10, 1.0)
    p.close(loss=0.1)
    assert out.getvalue() == ""


def test_interval_union_counts_overlaps_once() -> None:
    u = IntervalUnion()
    for a, b in [(0.0, 1.0), (0.5, 2.0), (3.0, 4.0), (3.5, 3.6), (5.0, 5.0)]:
        u.add(a, b)
    assert u.fold(cutoff=2.5) == pytest.approx(3.0)  # folds [0, 2], keeps [3, 4]
    assert len(u) == 1
    u.add(3.8, 4.5)
    assert u.fold() == pytest.approx(3.5)


def test_lookup_share_ratios_and_a_disabled_clock() -> None:
    share = LookupShare(lookup_seconds=2.0, exposed_seconds=0.5, step_seconds=8.0)
    assert share.lookup_ratio == 0.25 and share.exposed_lookup_ratio == 0.0625
    clock = SectionClock(enabled=False)
    with clock.section("lookup_forward"):
        pass
    assert clock.resolve() == {}
    assert clock.share(1.0).lookup_seconds == 0.0


def test_curve_png(tmp_path: Path) -> None:
    epochs = [
        EpochSummary.model_construct(
            epoch=1, phase="frozen", loss=0.5, eval=EvalSummary.model_construct(save_hit_at_3=0.3)
        ),
        EpochSummary.model_construct(
            epoch=2, phase="joint", loss=0.4, eval=EvalSummary.model_construct(save_hit_at_3=0.35)
        ),
    ]
    plot_curve(tmp_path / "curve.png", epochs)
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
