"""A year of daily runs under the shipped ``[retention]`` stays within a bound the policy sets, while
rollback and resume still work (issue 32, item 18: nothing was pruned, so the disk filled by design).

365 simulated days on a real registry and a real ``collect_garbage`` with an injected clock: each
day a run folder (model, eval scores, report, two epoch checkpoints with their sidecars, as
``ranker train`` leaves it) is registered and gc runs half a day later; a third of the candidates
are promoted, but none for 90 days in a row (the gate rejecting: the champion and the versions it
rolls back to grow older than ``run_days``, so only their role keeps their folders), a promotion
is rolled back every 50 days, a base is pretrained every 28 days, and
every day's window partition lands; a review's replay every 7 days and a backtest every 30 (each
with its report). One run is killed before it exported (resume must find its checkpoints all
year), one after it exported but before it registered (a re-run resumes it to register, so its
checkpoints stay ``run_days``). Files are small, their sizes fixed, so the bound is exact bytes.

The bound on the bytes outside the registry (runs, windows, backtests, reviews) at any day:

- run folders without checkpoints: the runs of the last ``run_days`` + 1 days (daily and base runs),
  plus every folder a role keeps (the champion and the base, ``keep_rollbacks`` rollbacks back from
  each, the newest ``keep_runs``, and the warm-start source of each of those), plus the two runs
  that never registered;
- checkpoints: the registered runs of the last ``checkpoint_days`` + 1 days, the unfinished run's,
  and the unregistered exported run's while it is younger than ``run_days``;
- window days: ``window_days`` + 1 of them; replays: those younger than ``backtest_days`` (+ 1 for
  the day one expires), whole; every report, kept.

Without retention the same year holds every folder, checkpoint, window day and replay: ~6x more.
The clock runs ahead of the wall clock (what gc removes bumps its folder's mtime to now: older).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import time
from pathlib import Path

from ranking.registry import Registry
from ranking.registry.janitor import collect_garbage
from ranking.registry.retention import REGISTERED_FILE, RetentionPolicy
from ranking.trainer.checkpointing.checkpoint import latest_complete_checkpoint

DAY = 86400.0
DAYS = 365
START = dt.date(2027, 1, 1)
MODEL, SCORES, EPOCH, PARTITION, REPLAY = 20_000, 5_000, 50_000, 10_000, 100_000
SMALL = 2_000  # a run folder's small files (configs, manifest, eval, report, markers), at most
POLICY = RetentionPolicy()  # the shipped [retention]: 1 / 30 / 14 days, keep 7 runs, 3 rollbacks
WINDOW_DAYS = 84  # ranking.config.requests.retention_policy of the shipped config
UNFINISHED, UNREGISTERED = 100, 200  # the days a run was killed before exporting / registering
REJECTED = (150, 240)  # 90 days of rejected candidates: the champion and its rollbacks age past run_days


def _write(path: Path, size: int, fill: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((fill * size)[:size])


def _stamp(path: Path, when: float) -> None:
    for sub in [path, *path.rglob("*")]:
        os.utime(sub, (when, when), follow_symlinks=False)


def _run_folder(run: Path, day: dt.date, warm: str, exported: bool = True) -> None:
    """What ``ranker train`` leaves: two epoch checkpoints (folders with sidecars), the export."""
    for epoch in (1, 2):
        folder = run / "checkpoints" / f"epoch-{epoch}"
        _write(folder / "__0_0.distcp", EPOCH - 200, b"c")
        _write(folder / "meta.json", 200, b"m")
        lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()} {f.name}" for f in sorted(folder.iterdir())]
        (run / "checkpoints" / f"epoch-{epoch}.sha256").write_text("\n".join(lines) + "\n")
    if not exported:
        return
    _write(run / "model.pt", MODEL, f"{run.name}|".encode())
    (run / "model.pt.sha256").write_text(f"{hashlib.sha256((run / 'model.pt').read_bytes()).hexdigest()}\n")
    _write(run / "eval_scores.parquet", SCORES)
    (run / "model_config.json").write_text(json.dumps({"tables": [], "dense": [8]}))
    (run / "eval.json").write_text(json.dumps({"save_hit_at_3": 0.3}))
    (run / "report.md").write_text(f"# {run.name}\n")
    window = {"end": day.isoformat(), "days": 20}
    manifest = {"window": window, "epochs": [{}, {}], "warm_start": {"source": warm}}
    (run / "train_manifest.json").write_text(json.dumps(manifest))


def _bytes(root: Path, *folders: str) -> int:
    total, stack = 0, [str(root / name) for name in folders if (root / name).is_dir()]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


def _bound() -> int:
    folder = MODEL + SCORES + SMALL
    checkpoints = 2 * (EPOCH + SMALL)
    assert POLICY.run_days is not None and POLICY.checkpoint_days is not None
    young = math.ceil(POLICY.run_days) + 1
    base_runs = math.ceil(POLICY.run_days / 28) + 1
    roles = 2 * (1 + POLICY.keep_rollbacks) + POLICY.keep_runs  # champion, base, rollbacks, newest
    kept = young + base_runs + 2 * roles + 2  # each with its warm-start source; never registered
    replays = (math.ceil(14 / 7) + 1) + (math.ceil(14 / 30) + 1)
    reports = (DAYS // 7 + DAYS // 30) * SMALL
    return (
        kept * folder
        + (math.ceil(POLICY.checkpoint_days) + 2 + 2) * checkpoints
        + (WINDOW_DAYS + 1) * (PARTITION + SMALL)
        + replays * REPLAY
        + reports
    )


def test_a_year_of_daily_runs_stays_within_the_policys_bound(tmp_path: Path) -> None:
    home = tmp_path / "home"
    reg = Registry(str(home / "registry"))
    policy = RetentionPolicy(window_days=WINDOW_DAYS)
    clock = time.time() + 10 * DAY  # ahead of the wall clock: see the module's docstring
    totals: list[int] = []
    for d in range(DAYS):
        day, now = START + dt.timedelta(days=d), clock + d * DAY
        source = home / "source" / "impressions" / f"date={day.isoformat()}"
        source.mkdir(parents=True)
        _write(home / "windows" / "days" / day.isoformat() / "part.parquet", PARTITION)
        _write(home / "windows" / f"{day.isoformat()}_20d" / "manifest.json", 100)
        for folder in (
            home / "windows" / "days" / day.isoformat(),
            home / "windows" / f"{day.isoformat()}_20d",
        ):
            _stamp(folder, now)
        if d % 28 == 0:  # ranker pretrain: a base from scratch
            base = home / "runs" / f"base-{day.isoformat()}"
            _run_folder(base, day, "none")
            version = reg.register(base, base.name)
            (base / REGISTERED_FILE).write_text(json.dumps({"version": version}))
            reg.set_base(version, reason="weekly pretrain")
            _stamp(base, now)
        run = home / "runs" / f"day-{day.isoformat()}"
        warm = f"base {reg.base()}" if d % 2 else f"champion {reg.champion()}" if reg.champion() else "none"
        _run_folder(run, day, warm, exported=d != UNFINISHED)
        if d not in (UNFINISHED, UNREGISTERED):
            version = reg.register(run, run.name)
            (run / REGISTERED_FILE).write_text(json.dumps({"version": version}))
            if d % 3 == 0 and not REJECTED[0] <= d < REJECTED[1]:
                reg.promote(version, reason="gate passed", force=True)
            if d % 50 == 49 and len(reg.history()) > 1:
                reg.rollback(reason="drill")
        _stamp(run, now)
        for name, every in (("review", 7), ("backtest", 30)):  # a replay with its report
            if d % every != every - 1:
                continue
            replay = home / "backtests" / f"{name}-{day}"
            _write(replay / "naive" / "home" / "runs" / "d1" / "model.pt", REPLAY - 100)
            _write(replay / "naive" / "days" / f"{day}.json", 100)
            # a review's report lies outside its replay; a backtest's inside (kept when it expires)
            report_md = home / "reviews" / day.isoformat() / "review.md"
            _write(report_md if name == "review" else replay / "report" / "backtest.md", 500)
            _stamp(replay, now)
            if name == "review":
                _stamp(report_md.parent, now)

        report = collect_garbage(home, reg, retention=policy, now=now + DAY / 2)
        assert report.failed == []
        totals.append(_bytes(home, "runs", "windows", "backtests", "reviews"))
        # what a rollback reads, and what the people deciding it read, is there every day
        champion = reg.champion()
        if champion is not None and len({e.to_version for e in reg.history()}) > 1:
            target = reg.rollback_target()
            for version in (champion, target):
                assert (home / "runs" / str(reg.record(version).run_id) / "report.md").is_file(), (d, version)

    bound = _bound()
    assert max(totals) <= bound, (max(totals), bound)
    everything = DAYS * (MODEL + SCORES + 2 * EPOCH) + DAYS * PARTITION + (DAYS // 7 + DAYS // 30) * REPLAY
    assert bound < everything / 5, (bound, everything)  # the bound is worth having
    # resume: the run killed before it exported still has its last complete epoch, a year on
    unfinished = home / "runs" / f"day-{START + dt.timedelta(days=UNFINISHED)}"
    found = latest_complete_checkpoint(unfinished)
    assert found is not None and found[0] == 2
    # the one killed before it registered kept its checkpoints run_days, then its model alone
    unregistered = home / "runs" / f"day-{START + dt.timedelta(days=UNREGISTERED)}"
    assert (unregistered / "model.pt").is_file() and not (unregistered / "checkpoints").exists()
    # every report is kept; no replay of the last 14 days lost anything, older ones are reports only
    assert len(list(home.glob("reviews/*/review.md"))) == DAYS // 7
    assert len(list(home.glob("backtests/backtest-*/report/backtest.md"))) == DAYS // 30
    assert not list(home.glob(f"backtests/review-{START}*/naive"))
    # a rollback works at the end of the year, to a version whose files verify
    before, target = reg.champion(), reg.rollback_target()
    event = reg.rollback(reason="end of year drill")
    assert (event.from_version, event.to_version) == (before, target)
    rec = reg.verify(target)
    assert reg.read_file(target, "model.pt") == (home / "runs" / str(rec.run_id) / "model.pt").read_bytes()
    # the registry is never pruned: a version a day and a base every 28 days, the newest verify
    assert len(reg.version_ids()) == DAYS - 2 + len(range(0, DAYS, 28))
    assert all(reg.verify(v).version == v for v in reg.version_ids()[-40:])
