"""infra/trainer_env.py (``make setup DEVICE=cuda`` / ``make wheels``): torch, fbgemm-gpu and torchrec
chosen together by the torch that runs them; an air-gapped install never reaches for an index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "trainer_env.py"
LOCK = REPO / "requirements" / "trainer.lock"


def _module():  # type: ignore[no-untyped-def]
    return load_script("infra/trainer_env.py")


def _dry_run(*args: str, host_torch: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"RANKER_HOST_TORCH": host_torch} if host_torch else {})}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--dry-run"], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_locked_torch_has_the_locked_pair() -> None:
    """One source: the pair for the lock's torch is what the CPU lock pins (fbgemm-gpu-cpu's version)."""
    env = _module()
    torch = env.locked_version(LOCK, "torch")
    pair = env.pair_for(torch)
    assert pair.fbgemm_gpu == env.locked_version(LOCK, "fbgemm-gpu-cpu")
    assert pair.torchrec == env.locked_version(LOCK, "torchrec")
    assert pair.tensordict == env.locked_version(LOCK, "tensordict")


def test_the_cuda_lock_replaces_exactly_the_paired_packages(tmp_path: Path) -> None:
    env = _module()
    kept = env.lock_lines(LOCK)
    names = {line.split("==")[0].lower() for line in kept}
    assert not names & {"torch", "fbgemm-gpu-cpu", "fbgemm-gpu", "torchrec", "tensordict"}
    locked = [ln for ln in LOCK.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(kept) == len(locked) - 4  # torch, fbgemm-gpu-cpu, torchrec, tensordict


def test_air_gapped_install_keeps_the_host_torch_and_uses_only_the_wheel_folder(tmp_path: Path) -> None:
    proc = _dry_run(
        "install", "--venv", str(tmp_path / "venv"), "--torch", "system", "--wheels", str(tmp_path),
        host_torch="2.11.0+cu130",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "fbgemm-gpu 1.6.0, torchrec 1.6.1" in out
    assert "--system-site-packages" in out
    installs = [line for line in out.splitlines() if " install " in line]
    assert installs and all("--no-index" in line and str(tmp_path) in line for line in installs)
    assert not any("torch==" in line for line in installs)  # the host's torch is kept


def test_online_install_takes_the_locked_cuda_torch(tmp_path: Path) -> None:
    proc = _dry_run("install", "--venv", str(tmp_path / "venv"))
    assert proc.returncode == 0, proc.stderr
    assert "torch==2.13.0" in proc.stdout and "fbgemm-gpu 1.8.0" in proc.stdout
    assert "--no-index" not in proc.stdout


@pytest.mark.parametrize(
    "args,host,message",
    [
        (("install", "--torch", "system"), "2.9.1", "no fbgemm-gpu/torchrec pair for torch 2.9.1"),
        (("install", "--torch", "system"), "nightly", "cannot read a torch version"),
        (("install", "--wheels", "/nonexistent/wheels"), None, "is not a folder"),
        (
            ("download", "--wheels", "w", "--torch-version", "3.0", "--python-version", "3.12"),
            None,
            "no fbgemm",
        ),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(tmp_path: Path, args, host, message) -> None:  # type: ignore[no-untyped-def]
    proc = _dry_run(
        *args, *(("--venv", str(tmp_path / "v")) if args[0] == "install" else ()), host_torch=host
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_download_pins_every_locked_package_with_the_pair(tmp_path: Path) -> None:
    env = _module()
    pins = env.wheel_pins(LOCK, "2.11")
    assert "fbgemm-gpu==1.6.0" in pins and "torchrec==1.6.1" in pins and "tensordict==0.12.4" in pins
    assert not any(p.startswith(("torch==", "fbgemm-gpu-cpu==", "iopath==")) for p in pins)
    assert env.sdist_only(LOCK) == ["iopath==0.1.10"]
