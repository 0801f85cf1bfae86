"""Crashes injected into real processes, and concurrent promoters in separate processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import StartLine

from ranking.core.errors import RegistryError
from ranking.registry import Registry
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]
REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_crash_after_registering_before_promoting_keeps_the_old_champion(
    tmp_path: Path, make_run: RunFactory
) -> None:
    root = tmp_path / "reg"
    reg = Registry(str(root))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    run = make_run()
    proc = run_python(
        f"""
        import os
        from ranking.registry import Registry
        from ranking.registry.records import Verdict
        reg = Registry({str(root)!r})
        v = reg.register(__import__("pathlib").Path({str(run)!r}), run_id="crashy")
        reg.record_verdict(v, Verdict(decision="pass", champion_version={v1!r}))
        os._exit(137)  # killed between writing the version and moving the alias
        """
    )
    assert proc.returncode == 137, proc.stderr
    assert reg.champion() == v1
    assert reg.version_ids() == [v1, "v0002"]
    assert reg.status("v0002", reg.champion()) == "promotable"  # visible, promotable later
    reg.verify("v0002")
    reg.promote("v0002", reason="after the crash")
    assert reg.champion() == "v0002"


def test_crash_while_copying_a_version_leaves_it_incomplete(tmp_path: Path, make_run: RunFactory) -> None:
    root = tmp_path / "reg"
    reg = Registry(str(root))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    run = make_run()
    proc = run_python(
        f"""
        import os
        from pathlib import Path
        from ranking.registry import Registry, storage
        real_put = storage.Storage.put_file
        def dying_put(self, src, rel):
            if rel.endswith("train_manifest.json"):
                os._exit(137)  # killed mid-copy: model.pt and model_config.json are already there
            real_put(self, src, rel)
        storage.Storage.put_file = dying_put
        Registry({str(root)!r}).register(Path({str(run)!r}))
        """
    )
    assert proc.returncode == 137, proc.stderr
    assert (root / "versions" / "v0002" / "model.pt").is_file()
    assert reg.status("v0002") == "incomplete"
    with pytest.raises(RegistryError, match="incomplete"):
        reg.promote("v0002", reason="x", force=True)
    assert reg.champion() == v1
    assert reg.register(make_run()) == "v0003"


def test_crash_while_moving_the_alias_leaves_the_old_champion(tmp_path: Path, make_run: RunFactory) -> None:
    root = tmp_path / "reg"
    reg = Registry(str(root))
    v1, v2 = reg.register(make_run()), reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    proc = run_python(
        f"""
        import os
        os.link = lambda *a, **k: os._exit(137)  # killed after writing the event's temp file
        from ranking.registry import Registry
        Registry({str(root)!r}).promote({v2!r}, reason="dies", force=True)
        """
    )
    assert proc.returncode == 137, proc.stderr
    assert reg.champion() == v1
    assert [e.to_version for e in reg.history()] == [v1]
    reg.promote(v2, reason="retry", force=True)
    assert [e.seq for e in reg.history()] == [1, 2]


WORKER = """
import os, sys, time
from pathlib import Path
from ranking.registry import Registry
root, start, versions, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
reg = Registry(root)
(start / f"ready-{os.getpid()}").touch()  # at the start line (tests/support/waiting.py)
while not (start / "go").exists():  # start together
    time.sleep(0.001)
for v in versions:
    try:
        event, _ = reg.promote(v, reason=f"worker {v}", force=(mode == "force"), who=v)
        print("OK", v, event.seq if event else "noop", flush=True)
    except Exception as exc:
        print("REFUSED", v, type(exc).__name__, exc, flush=True)
"""


def _race(root: Path, start: StartLine, batches: list[list[str]], mode: str) -> list[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root), str(start.folder), ",".join(batch), mode],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in batches
    ]
    start.release(procs)
    lines: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        lines += out.splitlines()
    return lines


@pytest.mark.slow
def test_concurrent_promotions_never_interleave(tmp_path: Path, make_run: RunFactory) -> None:
    root = tmp_path / "reg"
    reg = Registry(str(root))
    versions = [reg.register(make_run()) for _ in range(6)]
    # each worker flips the champion between its own two versions, 10 times
    batches = [[versions[2 * i], versions[2 * i + 1]] * 5 for i in range(3)]
    lines = _race(root, StartLine(tmp_path / "start"), batches, mode="force")
    assert all(line.startswith("OK") for line in lines), lines
    history = reg.history()
    moved = [line for line in lines if not line.endswith("noop")]
    assert len(history) == len(moved)
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    # the chain is unbroken: every move starts from where the previous one ended
    previous = None
    for event in history:
        assert event.from_version == previous and event.to_version != previous
        previous = event.to_version
    assert reg.champion() == history[-1].to_version


def test_a_promoter_that_loses_the_race_rechecks_against_the_new_champion(
    tmp_path: Path, make_run: RunFactory
) -> None:
    """Deterministic CAS race: another process promotes between our read and our write."""
    root = tmp_path / "reg"
    reg = Registry(str(root))
    v1, v2, v3 = (reg.register(make_run()) for _ in range(3))
    reg.promote(v1, reason="first", force=True)
    for v in (v2, v3):
        reg.record_verdict(v, Verdict(decision="pass", champion_version=v1))
    real_create = reg.store.create_exclusive
    raced: list[int] = []

    def create_after_a_rival(rel: str, data: bytes) -> bool:
        if rel.startswith("aliases/") and not raced:
            proc = run_python(
                f"from ranking.registry import Registry; Registry({str(root)!r}).promote({v3!r}, reason='rival')"
            )
            raced.append(proc.returncode)
        return real_create(rel, data)

    reg.store.create_exclusive = create_after_a_rival  # type: ignore[method-assign]
    with pytest.raises(RegistryError, match="compared it with v0001, but the champion is now v0003"):
        reg.promote(v2, reason="loses the race")
    assert raced == [0]
    assert [(e.from_version, e.to_version) for e in reg.history()] == [(None, v1), (v1, v3)]


@pytest.mark.slow
def test_concurrent_blessed_promoters_only_one_wins(tmp_path: Path, make_run: RunFactory) -> None:
    """Three candidates were all gated against the same champion; once one is promoted the
    others' verdicts are stale, so exactly one promotion happens."""
    root = tmp_path / "reg"
    reg = Registry(str(root))
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    candidates = [reg.register(make_run()) for _ in range(3)]
    for v in candidates:
        reg.record_verdict(v, Verdict(decision="pass", champion_version=v1))
    lines = _race(root, StartLine(tmp_path / "start"), [[v] for v in candidates], mode="blessed")
    assert sum(line.startswith("OK") for line in lines) == 1, lines
    assert sum("run the gate again" in line for line in lines) == 2, lines
    assert len(reg.history()) == 2 and reg.history()[1].from_version == v1


REGISTER_WORKER = """
import os, sys, time
from pathlib import Path
from ranking.registry import Registry
root, start, runs = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
reg = Registry(root)
(start / f"ready-{os.getpid()}").touch()
while not (start / "go").exists():
    time.sleep(0.001)
for run in runs:
    print("OK", reg.register(Path(run)), run, flush=True)
"""


@pytest.mark.slow
def test_concurrent_registrations_get_distinct_versions(tmp_path: Path, make_run: RunFactory) -> None:
    root = tmp_path / "reg"
    runs = [[str(make_run()) for _ in range(4)] for _ in range(3)]
    start = StartLine(tmp_path / "start")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", REGISTER_WORKER, str(root), str(start.folder), ",".join(batch)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in runs
    ]
    start.release(procs)
    registered: dict[str, str] = {}
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        for line in out.splitlines():
            _, version, run = line.split()
            assert version not in registered, f"{version} handed out twice"
            registered[version] = run
    reg = Registry(str(root))
    assert sorted(registered) == reg.version_ids() == [f"v{i:04d}" for i in range(1, 13)]
    for version, run in registered.items():
        assert reg.verify(version).source_run_dir == run  # each version holds its own run's files
        assert reg.read_file(version, "model.pt") == (Path(run) / "model.pt").read_bytes()
