"""The tiny workspace's dates (shared by conftest and the tests; a uniquely named module because
several test folders have a conftest.py)."""

from __future__ import annotations

import datetime as dt

START = dt.date(2026, 1, 1)
DAYS = 7  # 2026-01-01 .. 2026-01-07
WINDOW_DAYS = 5  # the tiny window: train 01-02..01-06, eval 01-07
