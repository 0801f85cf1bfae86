"""Bounds on numbers a user passes that reach a library's fixed-width argument or the machine's
resources: declared once, checked by the config models and the command-line flags alike."""

from __future__ import annotations

import math
import os
from pathlib import Path, PurePosixPath

# every seed. The code's own consumers take more (numpy's default_rng any size, torch.manual_seed
# 64 bits), but a seed also travels as JSON through DAG Params and summaries that JavaScript and
# float64 readers parse (exact only to 2**53), and 32 bits is what numpy's legacy seeding and most
# tools that replay a run accept; a seed of 2**64 crashed with "Overflow when unpacking long long"
MAX_SEED = 2**32 - 1

# a count that sizes an array or fills an int64 column (numpy, pyarrow): past it, an OverflowError
MAX_INT64 = 2**63 - 1

# a path's length and one component's, in bytes (Linux PATH_MAX, 4096 with its NUL; NAME_MAX):
# longer ones fail in the kernel (ENAMETOOLONG) after work has started, the whole path in the message
MAX_PATH_LEN = 4095
MAX_NAME_LEN = 255
# one line of free text a person writes (a reason, who acts, a URL, a job name): what the
# registry's history and the validation's acceptances record and print
MAX_TEXT_LEN = 1000

CGROUP_ROOT = Path("/sys/fs/cgroup")
OWN_CGROUP = Path("/proc/self/cgroup")


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, own: Path = OWN_CGROUP) -> float | None:
    """The CPUs this process's cgroup may use (quota / period: 1.5 for "150000 100000"), the least
    along its path (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), or
    None where none is set ("max", -1) or there is no cgroup to read."""
    quotas = [q for folder in _cgroup_folders(root, own) if (q := _quota(folder)) is not None]
    return min(quotas, default=None)


def _cgroup_folders(root: Path, own: Path) -> list[Path]:
    v2, v1 = "/", "/"
    try:
        lines = own.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:  # "0::/path" (v2), "4:cpu,cpuacct:/path" (v1)
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path or "/"
        elif "cpu" in controllers.split(","):
            v1 = path or "/"
    folders: list[Path] = []
    for base, path in ((root, v2), (root / "cpu", v1), (root / "cpu,cpuacct", v1)):
        # a container sees its own cgroup at the mount's root, not at the path the host names
        rel = PurePosixPath(path).relative_to("/")
        folders += [base / rel, *(base / p for p in rel.parents)]
    return [f for f in dict.fromkeys(folders) if f.is_dir()]


def _quota(folder: Path) -> float | None:
    try:
        if (folder / "cpu.max").is_file():
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        if (folder / "cpu.cfs_quota_us").is_file():
            quota_us = int((folder / "cpu.cfs_quota_us").read_text())
            period_us = int((folder / "cpu.cfs_period_us").read_text())
            return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError, ZeroDivisionError):
        return None  # a limit that cannot be read does not limit
    return None


def usable_cores(root: Path = CGROUP_ROOT, own: Path = OWN_CGROUP) -> int:
    """The cores this process may run on (its affinity), within its container's CPU limit
    (a quota of 1.5 CPUs is 2 cores: both run, each part of the time)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    limit = cgroup_cpu_limit(root, own)
    return cores if limit is None else max(1, min(cores, math.ceil(limit)))


# k: threads (or processes: torchrun ranks, replays at a time) a flag may ask for per usable core.
# Over one per core still pays where they wait (reading parquet, gloo's collectives, a replay's
# subprocess); past a few per core they only contend for the cores and each holds its own
# buffers. --threads 100000 exhausted the machine's threads (gloo failed, then SIGSEGV).
THREADS_PER_CORE = 4
USABLE_CORES = usable_cores()  # once per process: the flags and the config read it
MAX_THREADS = USABLE_CORES * THREADS_PER_CORE
MAX_THREADS_WHY = (
    f"at most {MAX_THREADS}: {USABLE_CORES} usable core{'s' if USABLE_CORES > 1 else ''} × {THREADS_PER_CORE}"
)
