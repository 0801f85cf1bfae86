"""The threads bound counts the cores within the container's CPU limit (issue 32, "Deliver 4"):
cgroup v2 ``cpu.max`` and v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, read from a fake
cgroup folder here."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from ranking.core.limits import (
    MAX_THREADS,
    MAX_THREADS_WHY,
    THREADS_PER_CORE,
    USABLE_CORES,
    cgroup_cpu_limit,
    usable_cores,
)

AFFINITY = len(os.sched_getaffinity(0))


def _v2(tmp_path: Path, cpu_max: str, path: str = "/") -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    folder = root / path.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.max").write_text(f"{cpu_max}\n")
    own = tmp_path / "self-cgroup"
    own.write_text(f"0::{path}\n")
    return root, own


def _v1(tmp_path: Path, quota: str, period: str = "100000", mount: str = "cpu,cpuacct") -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    folder = root / mount
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (folder / "cpu.cfs_period_us").write_text(f"{period}\n")
    own = tmp_path / "self-cgroup"
    own.write_text("12:memory:/\n4:cpu,cpuacct:/\n0::/\n")
    return root, own


@pytest.mark.parametrize(
    ("cpu_max", "limit"),
    [("max 100000", None), ("200000 100000", 2.0), ("150000 100000", 1.5), ("50000 100000", 0.5)],
)
def test_cgroup_v2_cpu_max(tmp_path: Path, cpu_max: str, limit: float | None) -> None:
    root, own = _v2(tmp_path, cpu_max)
    assert cgroup_cpu_limit(root, own) == limit
    expected = AFFINITY if limit is None else max(1, min(AFFINITY, math.ceil(limit)))
    assert usable_cores(root, own) == expected


def test_cgroup_v2_takes_the_least_limit_along_the_process_path(tmp_path: Path) -> None:
    root, own = _v2(tmp_path, "max 100000", "/kubepods/pod1/ctr")
    (root / "kubepods" / "pod1" / "cpu.max").write_text("50000 100000\n")
    (root / "kubepods" / "cpu.max").write_text("400000 100000\n")
    assert cgroup_cpu_limit(root, own) == 0.5
    assert usable_cores(root, own) == 1


def test_a_container_sees_its_own_cgroup_at_the_mount_root(tmp_path: Path) -> None:
    # /proc/self/cgroup names the host's path, which the container's mount does not hold
    root, own = _v2(tmp_path, "100000 100000")
    own.write_text("0::/system.slice/docker-abc.scope\n")
    assert cgroup_cpu_limit(root, own) == 1.0


@pytest.mark.parametrize(
    ("quota", "period", "mount", "limit"),
    [
        ("-1", "100000", "cpu,cpuacct", None),
        ("300000", "100000", "cpu,cpuacct", 3.0),
        ("25000", "50000", "cpu", 0.5),
    ],
)
def test_cgroup_v1_quota_and_period(
    tmp_path: Path, quota: str, period: str, mount: str, limit: float | None
) -> None:
    root, own = _v1(tmp_path, quota, period, mount)
    assert cgroup_cpu_limit(root, own) == limit


@pytest.mark.parametrize("garbage", ["", "max", "abc 100000", "100000 0"])
def test_an_unreadable_limit_does_not_limit(tmp_path: Path, garbage: str) -> None:
    root, own = _v2(tmp_path, garbage)
    assert cgroup_cpu_limit(root, own) is None
    assert usable_cores(root, own) == AFFINITY


def test_no_cgroup_at_all_leaves_the_affinity(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(tmp_path / "none", tmp_path / "no-such-file") is None
    assert usable_cores(tmp_path / "none", tmp_path / "no-such-file") == AFFINITY


def test_the_threads_bound_is_the_usable_cores_times_k_and_says_so() -> None:
    assert 1 <= USABLE_CORES <= AFFINITY
    assert MAX_THREADS == USABLE_CORES * THREADS_PER_CORE
    cores = f"{USABLE_CORES} usable core{'s' if USABLE_CORES > 1 else ''}"
    assert f"at most {MAX_THREADS}: {cores} × {THREADS_PER_CORE}" == MAX_THREADS_WHY
