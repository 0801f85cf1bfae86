"""`ranker study` takes the window checks from the pipeline config: an imported log whose days are
mostly first-seen users (user features > 50% null) and mostly positives (label rate > 50%) fails
the default checks, and runs once the config relaxes them (slow: Feast + real training)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ranking.cli.main import main

DAYS = 6
START = dt.date(2026, 2, 1)


def _log(path: Path) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    returning = [f"u-old-{i}" for i in range(6)]
    for d in range(DAYS):
        day = START + dt.timedelta(days=d)
        users = returning[:3] + [f"u-new-{d}-{i}" for i in range(9)]  # 75% first seen that day
        for u in users:
            for k, item in enumerate(rng.choice(40, size=8, replace=False)):
                rows.append(
                    {
                        "user": u,
                        "item": f"p{item}",
                        "ts": f"{day.isoformat()}T{8 + k:02d}:00:00Z",
                        "label": int(rng.random() < 0.6),  # more positives than negatives
                    }
                )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_study_on_an_imported_log_runs_with_relaxed_checks_from_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real log's first days (a label rate above 50 %, users without snapshots) used to need the
    window's absolute caps relaxed before a study could build its windows; the caps moved to the
    data validation step ([validation], off by default), and a config that still sets them in
    [window] is one line naming the new section."""
    home = tmp_path / "home"
    events = _log(tmp_path / "events.csv")
    common = ["--home", str(home)]
    assert main(["data", "import", "--events", str(events), "--user-col", "user", "--item-col", "item",
                 "--time-col", "ts", "--label-col", "label", *common, "--json"]) == 0  # fmt: skip
    assert main(["features", "apply", *common, "--json"]) == 0
    capsys.readouterr()
    end = (START + dt.timedelta(days=DAYS - 1)).isoformat()
    study = ["study", "--end", end, "--windows", "3", "--epochs", "1", "--schedules", "joint", "--seeds", "1",
             "--inits", "scratch", "--parallel", "1", "--batch-size", "64", *common, "--json"]  # fmt: skip

    (home / "ranker.toml").write_text("[window]\nmax_null_rate = 1.0\nmax_label_rate = 0.9\n")
    assert main(study) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_label_rate, max_null_rate moved to the [validation] section" in err[0]

    (home / "ranker.toml").write_text("[window]\nmin_coverage = 1.0\n")
    assert main(study) == 0, capsys.readouterr().err[-2000:]
    capsys.readouterr()
    manifest = home / "windows" / f"{end}_3d" / "manifest.json"
    assert json.loads(manifest.read_text())["checks"] == {"min_coverage": 1.0}
    assert json.loads(manifest.read_text())["label_rate"] > 0.5
