"""A train job for tests: what the workspace's pipeline config asks (its [recipe] and [window],
each default written once there), with the fields a test sets."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from ranking.config.loader import load
from ranking.config.requests import train_job
from ranking.core.workspace import Workspace
from ranking.trainer.job import TrainJob


def job_for(ws: Workspace, end: dt.date, **fields: Any) -> TrainJob:
    return dataclasses.replace(train_job(load(ws.root), ws, end), effective_config=None, **fields)
