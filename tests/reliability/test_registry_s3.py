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

from ranking.registry import Registry

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
    reg.record_verdict(v2, {"decision": "pass", "champion_version": v1})
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
import sys, time
from pathlib import Path
from ranking.registry import Registry
root, go, versions = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
reg = Registry(root)
reg.champion()  # connect before the start line
while not go.exists():
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
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, s3_registry, str(go), ",".join(batch)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        for batch in batches
    ]
    time.sleep(3)  # every worker imported and connected
    go.touch()
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
