"""Content checksums (sha256) of files, streamed."""

from __future__ import annotations

import hashlib
import os
from typing import Protocol


class ReadableBinary(Protocol):
    """An open binary file: a local one, or an fsspec one (local, memory, s3, gcs)."""

    def readinto(self, buffer: bytearray, /) -> int: ...

    def readable(self) -> bool: ...


def sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as f:
        return sha256_fileobj(f)


def sha256_fileobj(f: ReadableBinary) -> str:
    """The checksum of an open binary file, read from its current position to the end."""
    return hashlib.file_digest(f, "sha256").hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
