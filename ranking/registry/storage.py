"""The few file operations the registry needs, on a local folder (os-level atomicity) or any fsspec
filesystem. Writes never leave a half-written file under its final name."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_path, atomic_write_bytes, fsync_dir
from ranking.core.errors import RegistryError
from ranking.core.hashing import sha256_fileobj


def json_bytes(obj: Any) -> bytes:
    """How every registry JSON file is encoded (sorted keys: byte-stable for the same content)."""
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()


class Storage:
    """Root-relative file operations under a registry root URL."""

    def __init__(self, url: str) -> None:
        from fsspec.core import url_to_fs
        from fsspec.implementations.local import LocalFileSystem

        self.url = url
        self.fs, root = url_to_fs(url)
        self.local = isinstance(self.fs, LocalFileSystem)
        self.root = root.rstrip("/") or "/"

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.root != "/" else f"/{rel}"

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def listdir(self, rel: str) -> list[str]:
        """Base names of the entries of a folder ([] when it does not exist)."""
        self.fs.invalidate_cache(self.path(rel))  # s3fs/gcsfs cache listings; the alias needs fresh ones
        try:
            entries = self.fs.ls(self.path(rel), detail=False)
        except FileNotFoundError:
            return []
        return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def read_bytes(self, rel: str) -> bytes:
        try:
            return bytes(self.fs.cat_file(self.path(rel)))
        except FileNotFoundError:
            raise RegistryError(f"missing in registry {self.url}: {rel}") from None

    def read_json(self, rel: str) -> Any:
        data = self.read_bytes(rel)
        try:
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise RegistryError(f"corrupt JSON in registry {self.url}: {rel}: {exc}") from None

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace ``rel`` atomically."""
        if self.local:
            atomic_write_bytes(self.path(rel), data)
        else:  # object stores publish an object only when its upload completes
            self.fs.pipe_file(self.path(rel), data)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` with ``data`` only if it does not exist; False if it already does.

        Local: write a temp file, then hard-link it to the final name (link(2) fails if the name
        exists, and the content is complete before the name appears). Other filesystems: mode "xb"
        (s3fs: If-None-Match, gcsfs: ifGenerationMatch=0, memory: checked create).
        """
        target = self.path(rel)
        if self.local:
            parent = Path(target).parent
            parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.link(tmp, target)
                fsync_dir(parent)  # the new name must survive a power cut, not just the bytes
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        try:
            with self.fs.open(target, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False

    def put_file(self, local_src: Path, rel: str) -> None:
        target = self.path(rel)
        if self.local:
            with atomic_path(target) as tmp:
                shutil.copyfile(local_src, tmp)
        else:
            self.fs.put_file(str(local_src), target)

    def get_file(self, rel: str, local_dst: Path) -> None:
        if self.local:
            shutil.copyfile(self.path(rel), local_dst)
        else:
            self.fs.get_file(self.path(rel), str(local_dst))

    def sha256(self, rel: str) -> str:
        with self.fs.open(self.path(rel), "rb") as f:
            return sha256_fileobj(f)
