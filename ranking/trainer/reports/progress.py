"""Progress of an epoch: a tqdm bar with samples/s on a TTY, structured JSON log lines otherwise
(stderr either way; stdout carries only the command's summary)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

log = logging.getLogger("ranking.trainer.loop")


def log_event(event: str, stream: TextIO | None = None, **fields: Any) -> None:
    """One JSON object per line: what log collectors parse."""
    line = json.dumps({"event": event, "ts": round(time.time(), 3), **fields}, sort_keys=True, default=str)
    print(line, file=stream or sys.stderr, flush=True)


class EpochProgress:
    """Tracks samples/s and loss within an epoch; renders a bar (TTY) or periodic JSON lines."""

    def __init__(
        self,
        epoch: int,
        epochs: int,
        phase: str,
        steps: int,
        rows: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval_s: float = 10.0,
    ) -> None:
        self.epoch, self.epochs, self.phase, self.steps, self.rows = epoch, epochs, phase, steps, rows
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interval_s = interval_s
        self.done_rows = 0
        self.done_steps = 0
        self.loss_sum = 0.0
        self.start = time.perf_counter()
        self._last_log = self.start
        self._bar: Any = None
        if enabled and self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=rows,
                unit="sample",
                unit_scale=True,
                desc=f"epoch {epoch}/{epochs} [{phase}]",
                file=self.stream,
                leave=True,
            )

    def update(self, rows: int, loss_sum: float) -> None:
        """After each global step: rows in it and the summed loss over those rows."""
        self.done_rows += rows
        self.done_steps += 1
        self.loss_sum += loss_sum
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(rows)
            if self.done_steps % 20 == 0:
                self._bar.set_postfix(loss=f"{self.loss_sum / max(self.done_rows, 1):.4f}")
            return
        now = time.perf_counter()
        if now - self._last_log >= self.interval_s:
            self._last_log = now
            log_event(
                "train_progress",
                self.stream,
                epoch=self.epoch,
                phase=self.phase,
                step=self.done_steps,
                steps=self.steps,
                samples=self.done_rows,
                samples_per_second=round(self.done_rows / (now - self.start), 1),
                loss=round(self.loss_sum / max(self.done_rows, 1), 6),
            )

    def close(self, **summary: Any) -> None:
        if self._bar is not None:
            self._bar.close()
        if self.enabled:
            log_event("epoch_end", self.stream, epoch=self.epoch, phase=self.phase, **summary)
