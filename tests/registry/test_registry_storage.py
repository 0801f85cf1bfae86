"""Registry storage: exclusive create, atomic replace and checksums on a local folder and memory fs."""

from __future__ import annotations

import hashlib

from ranking.registry.storage import Storage, json_bytes


def test_create_exclusive_creates_once(registry_url: str) -> None:
    store = Storage(registry_url)
    assert store.create_exclusive("aliases/champion/00000001.json", b"first")
    assert not store.create_exclusive("aliases/champion/00000001.json", b"second")
    assert store.read_bytes("aliases/champion/00000001.json") == b"first"
    assert store.listdir("aliases/champion") == ["00000001.json"]  # no temp file left behind
    assert store.listdir("nowhere") == []


def test_write_replaces_and_sha256_streams(registry_url: str) -> None:
    store = Storage(registry_url)
    store.write_bytes("verdicts/v0001.json", json_bytes({"b": 1, "a": [2]}))
    store.write_bytes("verdicts/v0001.json", json_bytes({"a": [2], "b": 1}))
    data = store.read_bytes("verdicts/v0001.json")
    assert data == b'{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'  # sorted keys: the same bytes either way
    assert store.read_json("verdicts/v0001.json") == {"a": [2], "b": 1}
    assert store.sha256("verdicts/v0001.json") == hashlib.sha256(data).hexdigest()
