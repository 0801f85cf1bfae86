"""The registry on a real S3-compatible server (moto's standalone server on 127.0.0.1): the
alias's compare-and-swap rests on S3's conditional create (PUT If-None-Match: *, which s3fs sends
for mode "xb"), so concurrent promoters in separate processes must never tear the history."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_fixtures import RunFactory
from waiting import StartLine

from ranking.registry import Registry
from ranking.registry.records import Verdict

pytest.importorskip("s3fs")
pytest.importorskip("moto")

REPO = Path(__file__).resolve().parents[2]
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    # the server logs every request: to a file (a pipe nobody reads fills up and blocks it)
    log_path = tmp_path_factory.mktemp("moto") / "server.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below, after the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **S3_ENV},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"moto server exited: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("moto server did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def s3_registry(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket; the endpoint reaches s3fs (and worker processes) through the environment."""
    import s3fs

    for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(key, value)
    bucket = f"ranker-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint}).mkdir(bucket)
    return f"s3://{bucket}/registry"


def test_register_promote_verify_and_download_on_s3(
    s3_registry: str, make_run: RunFactory, tmp_path: Path
) -> None:
    reg = Registry(s3_registry)
    v1 = reg.register(make_run())
    reg.promote(v1, reason="first", force=True)
    v2 = reg.register(make_run())
    reg.record_verdict(v2, Verdict(decision="pass", champion_version=v1))
    reg.promote(v2, reason="better")
    assert Registry(s3_registry).champion() == v2  # a fresh client sees the same state
    assert [(e.from_version, e.to_version) for e in reg.history()] == [(None, v1), (v1, v2)]
    reg.verify(v1)
    local = reg.local_dir(v2, tmp_path / "cache")
    assert (local / "model.pt").read_bytes() == reg.read_file(v2, "model.pt")
    reg.rollback(reason="back")
    assert reg.champion() == v1


def test_s3_create_is_conditional_on_the_server(s3_registry: str) -> None:
    store = Registry(s3_registry).store
    assert store.create_exclusive("aliases/champion/00000001.json", b'{"first": true}')
    # the second create reaches the server, which refuses it (412): never a silent overwrite
    assert not store.create_exclusive("aliases/champion/00000001.json", b'{"second": true}')
    assert store.read_bytes("aliases/champion/00000001.json") == b'{"first": true}'


WORKER = """
import os, sys, time
from pathlib import Path
from ranking.registry import Registry
root, start, versions = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
reg = Registry(root)
reg.champion()  # connect before the start line
(start / f"ready-{os.getpid()}").touch()  # at the start line (tests/support/waiting.py)
while not (start / "go").exists():
    time.sleep(0.001)
for v in versions:
    try:
        event, _ = reg.promote(v, reason=f"worker {v}", force=True, who=v)
        print("OK", v, event.seq if event else "noop", flush=True)
    except Exception as exc:
        print("REFUSED", v, type(exc).__name__, exc, flush=True)
"""


@pytest.mark.slow
def test_concurrent_promotions_on_s3_never_interleave(
    s3_registry: str, make_run: RunFactory, tmp_path: Path
) -> None:
    reg = Registry(s3_registry)
    versions = [reg.register(make_run()) for _ in range(6)]
    batches = [[versions[2 * i], versions[2 * i + 1]] * 4 for i in range(3)]
    start = StartLine(tmp_path / "start")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, s3_registry, str(start.folder), ",".join(batch)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        for batch in batches
    ]
    start.release(procs)  # every worker imported and connected
    lines: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        lines += out.splitlines()
    assert all(line.startswith("OK") for line in lines), lines
    history = reg.history()
    moved = [line for line in lines if not line.endswith("noop")]
    assert len(history) == len(moved)
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    previous = None
    for event in history:  # every move starts where the previous one ended
        assert event.from_version == previous and event.to_version != previous
        previous = event.to_version
    assert reg.champion() == history[-1].to_version


# ---------------------------------------------------------------- issue 25: object-store faults


def test_rollback_on_s3_refuses_when_a_promotion_lands_during_its_verify(
    s3_registry: str, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_registry_history_faults import assert_rollback_refused_when_a_promotion_lands

    assert_rollback_refused_when_a_promotion_lands(s3_registry, make_run, monkeypatch)


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [["models", "list"], ["promote", "v0001", "--reason", "x", "--force"], ["gc"]],
)
def test_an_unreachable_endpoint_is_one_line(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import s3fs

    from ranking.cli.main import main

    s3fs.S3FileSystem.clear_instance_cache()  # an instance of another test knows another endpoint
    for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's retries: seconds each, same answer
    try:
        code = main([*argv, "--home", str(tmp_path), "--registry", "s3://ranker/registry", "--json"])
    finally:
        s3fs.S3FileSystem.clear_instance_cache()  # later tests must not reach this dead endpoint
    captured = capsys.readouterr()
    assert code == 2, captured
    line = _one_line(captured.err)
    assert "registry s3://ranker/registry: cannot reach the object store (EndpointConnectionError" in line


def test_a_missing_bucket_is_one_line_not_an_empty_registry(
    s3_registry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.cli.main import main

    missing = "s3://no-such-bucket-" + uuid.uuid4().hex[:8] + "/registry"
    assert main(["models", "list", "--home", str(tmp_path), "--registry", missing]) == 2
    captured = capsys.readouterr()
    assert f"bucket '{missing[5:].split('/')[0]}' does not exist" in _one_line(captured.err)
    assert "versions:" not in captured.out
    # the bucket that exists is an empty registry, as before
    assert main(["models", "list", "--home", str(tmp_path), "--registry", s3_registry]) == 0


def test_ranker_run_checks_the_bucket_before_anything_else(
    s3_registry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the window was built and the model trained, then registering failed (exit 70)."""
    from ranking.cli.main import main

    home = tmp_path / "home"
    missing = "s3://no-such-bucket-" + uuid.uuid4().hex[:8] + "/registry"
    argv = ["run", "--home", str(home), "--registry", missing, "--end", "2026-01-21", "--run-id", "r1"]
    assert main(argv) == 2
    assert "does not exist" in _one_line(capsys.readouterr().err)
    assert not (home / "windows").exists() and not (home / "runs").exists()
