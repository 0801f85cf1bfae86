#!/usr/bin/env python3
"""The trainer environment (.venv) for a CUDA machine, online or air-gapped (``make setup DEVICE=cuda``).

    # a GPU machine with PyPI: the lock with PyPI's CUDA torch 2.13 and fbgemm-gpu 1.8.0
    make setup DEVICE=cuda
    # air-gapped, as clusters are: the host's own torch, every other wheel from a local folder
    make setup DEVICE=cuda TORCH=system WHEELS=/path/to/wheels
    # ... and that folder, made on a machine with PyPI for the host's torch and Python
    make wheels WHEELS=/path/to/wheels TORCH_VERSION=2.11 PYTHON_VERSION=3.12

fbgemm-gpu is built against one torch release and torchrec follows fbgemm-gpu's minor version, so the
trainer's three compiled pieces are chosen together from ``PAIRS`` by the torch that will run them;
everything else is the lock (requirements/trainer.lock), installed ``--no-deps`` as on CPU.
Standard library only: it runs before any environment exists. ``--dry-run`` prints the commands.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class EnvError(Exception):
    """A bad setting: one line on stderr, exit 2."""


@dataclass(frozen=True)
class Pair:
    """What goes with one torch minor release on CUDA (fbgemm-gpu's release table; torchrec
    follows fbgemm-gpu's minor; tensordict is torchrec's compiled dependency)."""

    fbgemm_gpu: str
    torchrec: str
    tensordict: str
    verified: str  # where this pair ran the trainer


PAIRS: dict[str, Pair] = {
    "2.13": Pair("1.8.0", "1.8.0", "0.15.3", "the locks: CPU CI (fbgemm-gpu-cpu 1.8.0)"),
    "2.11": Pair("1.6.0", "1.6.1", "0.12.4", "an H200, torch 2.11.0+cu130, 2026-12-04 (../shared/gpu)"),
}
# the lock's lines that PAIRS replaces on CUDA
PAIRED = ("torch", "fbgemm-gpu-cpu", "fbgemm-gpu", "torchrec", "tensordict")


def minor(version: str) -> str:
    m = re.match(r"^(\d+)\.(\d+)", version)
    if not m:
        raise EnvError(f"cannot read a torch version from {version!r}")
    return f"{m.group(1)}.{m.group(2)}"


def pair_for(torch_version: str) -> Pair:
    key = minor(torch_version)
    if key not in PAIRS:
        raise EnvError(
            f"no fbgemm-gpu/torchrec pair for torch {torch_version} "
            f"(known: {', '.join(sorted(PAIRS))}); add one to infra/trainer_env.py PAIRS"
        )
    return PAIRS[key]


def lock_lines(lock: Path) -> list[str]:
    """The lock's pins, without the paired packages."""
    keep = []
    for line in lock.read_text().splitlines():
        name = re.split(r"[=<>!~ ;\[]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")
        if line.strip() and not line.startswith("#") and name not in PAIRED:
            keep.append(line.strip())
    return keep


def locked_version(lock: Path, name: str) -> str:
    for line in lock.read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise EnvError(f"{lock} pins no {name}")


def paired_pins(pair: Pair) -> list[str]:
    return [f"fbgemm-gpu=={pair.fbgemm_gpu}", f"torchrec=={pair.torchrec}", f"tensordict=={pair.tensordict}"]


def install_plan(
    venv: Path, lock: Path, torch_source: str, wheels: Path | None, python: str
) -> list[list[str]]:
    """The commands that make ``venv`` a CUDA trainer environment.

    ``torch_source``: ``pypi`` (the lock's torch, PyPI's CUDA build, with its nvidia-* wheels) or
    ``system`` (the venv sees the host's site-packages, whose torch is kept as it is)."""
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps"]
    if wheels is not None:
        pip += ["--no-index", "--find-links", str(wheels)]
    plan: list[list[str]] = []
    if not (venv / "bin" / "python").exists():
        plan.append(
            [
                python,
                "-m",
                "venv",
                *(["--system-site-packages"] if torch_source == "system" else []),
                str(venv),
            ]
        )
    # a venv set up for the CPU holds torch +cpu and fbgemm-gpu-cpu: neither may stay beside CUDA's
    plan.append(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "fbgemm-gpu-cpu", "fbgemm-gpu"]
    )
    if torch_source == "pypi":
        plan.append([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "torch"])
    cuda_lock = venv / "cuda.lock"
    plan.append(["write", str(cuda_lock)])
    plan.append([*pip, "-r", str(cuda_lock)])
    if torch_source == "pypi":
        # PyPI's torch==X is the CUDA build; its nvidia-* runtime wheels come through the resolver
        extra = ["--no-index", "--find-links", str(wheels)] if wheels is not None else []
        plan.append(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                *extra,
                f"torch=={locked_version(lock, 'torch')}",
            ]
        )
    plan.append(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import torch, fbgemm_gpu, torchrec; print('trainer env:', torch.__version__, 'cuda', "
            "torch.cuda.is_available(), 'fbgemm-gpu', fbgemm_gpu.__version__, 'torchrec', torchrec.__version__)",
        ]
    )
    return plan


def download_plan(wheels: Path, lock: Path, torch_version: str, python_version: str) -> list[list[str]]:
    """On a machine with PyPI: every wheel an air-gapped host with this torch and Python needs."""
    pair = pair_for(torch_version)
    platform = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for tag in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any"):
        platform += ["--platform", tag]
    pins = wheels / "pins.txt"
    return [
        ["write-pins", str(pins), torch_version],
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            *platform,
            "-d",
            str(wheels),
            "-r",
            str(pins),
        ],
        # sdist-only pins (iopath) become wheels here, where a compiler and PyPI are
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), *sdist_only(lock)],
        [
            "echo",
            f"wheels for torch {torch_version} (fbgemm-gpu {pair.fbgemm_gpu}, torchrec {pair.torchrec}) in {wheels}",
        ],
    ]


SDIST_ONLY = ("iopath",)  # no wheel on PyPI


def sdist_only(lock: Path) -> list[str]:
    return [line for line in lock_lines(lock) if line.split("==")[0].lower() in SDIST_ONLY]


def wheel_pins(lock: Path, torch_version: str) -> list[str]:
    return [line for line in lock_lines(lock) if line.split("==")[0].lower() not in SDIST_ONLY] + paired_pins(
        pair_for(torch_version)
    )


def host_torch(venv_python: str) -> str:
    """The torch version the host's Python already has (TORCH=system)."""
    proc = subprocess.run(
        [venv_python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise EnvError(
            f"TORCH=system but {venv_python} cannot import torch (a .venv made without the host's"
            " site-packages? remove it, or install torch on the host)"
        )
    return proc.stdout.strip()


def run(plan: list[list[str]], lock: Path, torch_version: str, dry_run: bool) -> None:
    for cmd in plan:
        print("+ " + shlex.join(cmd), flush=True)
        if dry_run:
            continue
        if cmd[0] == "write":
            Path(cmd[1]).write_text(
                "\n".join([*lock_lines(lock), *paired_pins(pair_for(torch_version))]) + "\n"
            )
        elif cmd[0] == "write-pins":
            Path(cmd[1]).parent.mkdir(parents=True, exist_ok=True)
            Path(cmd[1]).write_text("\n".join(wheel_pins(lock, cmd[2])) + "\n")
        else:
            subprocess.run(cmd, check=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="infra/trainer_env.py")
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="make VENV a CUDA trainer environment")
    inst.add_argument("--venv", type=Path, default=REPO / ".venv")
    inst.add_argument("--torch", choices=("pypi", "system"), default="pypi")
    inst.add_argument(
        "--wheels", type=Path, default=None, help="a local wheel folder: install with --no-index"
    )
    inst.add_argument("--python", default="python3", help="the interpreter that creates the venv")
    dl = sub.add_parser("download", help="fill a wheel folder for an air-gapped host")
    dl.add_argument("--wheels", type=Path, required=True)
    dl.add_argument("--torch-version", required=True, help="the host's torch, e.g. 2.11")
    dl.add_argument("--python-version", required=True, help="the host's Python, e.g. 3.12")
    for p in (inst, dl):
        p.add_argument("--lock", type=Path, default=REPO / "requirements" / "trainer.lock")
        p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except EnvError as exc:
        print(f"trainer_env: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    if args.wheels is not None and args.command == "install" and not args.wheels.is_dir():
        print(f"trainer_env: WHEELS={args.wheels} is not a folder", file=sys.stderr)
        return 2
    if args.command == "download":
        run(
            download_plan(args.wheels, args.lock, args.torch_version, args.python_version),
            args.lock,
            args.torch_version,
            args.dry_run,
        )
        return 0
    if args.torch == "system":
        python = str(args.venv / "bin" / "python") if (args.venv / "bin" / "python").exists() else args.python
        version = os.environ.get("RANKER_HOST_TORCH") or host_torch(python)
    else:
        version = locked_version(args.lock, "torch")
    pair = pair_for(version)
    print(
        f"trainer_env: torch {version} ({args.torch}) -> fbgemm-gpu {pair.fbgemm_gpu}, torchrec {pair.torchrec}",
        flush=True,
    )
    run(
        install_plan(args.venv, args.lock, args.torch, args.wheels, args.python),
        args.lock,
        version,
        args.dry_run,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
