"""The few file operations the registry needs, on a local folder (os-level atomicity) or any fsspec
filesystem. Writes never leave a half-written file under its final name."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_path, atomic_write_bytes, fsync_dir, new_temp_file
from ranking.core.errors import RegistryError
from ranking.core.hashing import sha256_fileobj

log = logging.getLogger(__name__)

# temp files of a local exclusive create or atomic write whose writer was killed: a live writer
# holds one for milliseconds, so anything older than this is an orphan
_ORPHAN_TEMP = re.compile(r"^\..+\.tmp$")
ORPHAN_TEMP_AGE_SECONDS = 3600.0

# fsspec filesystems whose mode "xb" is a server-side conditional create (the alias's
# compare-and-swap rests on it); every other backend's "xb" is fsspec's exists-then-write, under
# which two promotions can interleave, so it is refused by name rather than silently degraded
CONDITIONAL_CREATE_BACKENDS: dict[str, str] = {
    "fsspec.implementations.local.LocalFileSystem": "link(2) of a complete temp file",
    "fsspec.implementations.memory.MemoryFileSystem": "checked create (one process only: tests)",
    "s3fs.core.S3FileSystem": "PUT with If-None-Match: *",
    "gcsfs.core.GCSFileSystem": "upload with ifGenerationMatch=0",
}
# the package behind each protocol a registry URL may name, for the message when it is missing
_BACKEND_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}


def _is_object_store(fs: Any) -> bool:
    """s3fs / gcsfs: roots start with a bucket."""
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(fs).__mro__}
    return bool(names & {"s3fs.core.S3FileSystem", "gcsfs.core.GCSFileSystem"})


def _modified(info: dict[str, Any]) -> float | None:  # an fsspec listing entry: each backend's own keys
    """A listing entry's modification time: local ``mtime``, S3 ``LastModified``, GCS ``updated``,
    memory ``created`` (numbers or datetimes/ISO strings, as each backend gives them)."""
    import datetime as dt

    for key in ("mtime", "LastModified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, dt.datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def json_bytes(obj: Any) -> bytes:
    """How every registry JSON file is encoded (sorted keys: byte-stable for the same content)."""
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()


def _open_fs(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of a registry URL, refusing backends that cannot do the alias's
    compare-and-swap (see CONDITIONAL_CREATE_BACKENDS) and naming a missing backend package.
    The class is checked before it is instantiated (some backends connect on construction)."""
    from fsspec.core import split_protocol, url_to_fs
    from fsspec.registry import get_filesystem_class

    protocol = (split_protocol(url)[0] or "file").lower()
    try:
        cls = get_filesystem_class(protocol)
    except ImportError as exc:
        package = _BACKEND_PACKAGES.get(protocol, f"the fsspec backend of {protocol}://")
        raise RegistryError(
            f"registry {url}: {protocol}:// needs {package}, which is not installed ({exc})"
        ) from None
    except ValueError as exc:
        raise RegistryError(f"registry {url}: unknown fsspec protocol {protocol!r} ({exc})") from None
    names = {f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__}
    if not names & set(CONDITIONAL_CREATE_BACKENDS):
        raise RegistryError(
            f"registry {url}: the {protocol}:// backend ({cls.__name__}) has no conditional"
            " create, so two promotions could interleave; use a local folder, s3:// or gs://"
        )
    try:
        fs, root = url_to_fs(url)
    except (ImportError, ValueError, TypeError) as exc:
        raise RegistryError(f"registry {url}: cannot open it ({type(exc).__name__}: {exc})") from None
    return fs, root


# credential failures of object-store clients (not OSErrors): the user fixes them
_CREDENTIAL_ERRORS = {
    "NoCredentialsError",
    "PartialCredentialsError",
    "DefaultCredentialsError",
    "RefreshError",
}


# the object-store clients' "cannot reach the endpoint" errors (botocore's ConnectionError family,
# aiohttp's client connection/timeout errors, and the builtin ConnectionError family): matched by
# name in the exception's classes, as the clients are optional imports
_UNREACHABLE_ERRORS = {
    "ConnectionError",  # botocore.exceptions and builtins (ConnectionRefusedError, ...)
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ClientConnectorError",
    "ServerTimeoutError",
    "ServerDisconnectedError",
    "TimeoutError",
}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def backend_error(url: str, exc: BaseException) -> RegistryError | None:
    """The one line a backend failure the user fixes becomes (credentials, an endpoint that
    cannot be reached); None for anything else."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _CREDENTIAL_ERRORS:
        return RegistryError(f"registry {url}: no usable credentials ({exc})")
    if names & _UNREACHABLE_ERRORS:
        return RegistryError(
            f"registry {url}: cannot reach the object store ({type(exc).__name__}: {_first_line(exc)})"
        )
    return None


def _backend_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Storage, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            error = backend_error(self.url, exc)
            if error is not None:
                raise error from None
            raise

    return wrapper


def local_exists(path: str) -> bool:
    """Whether a local path exists; unlike os.path.exists, a folder we may not search (EACCES)
    is an error naming it, not "absent" (a registry would list unreadable versions as incomplete)."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


class Storage:
    """Root-relative file operations under a registry root URL."""

    def __init__(self, url: str) -> None:
        from fsspec.implementations.local import LocalFileSystem

        self.url = url
        self.fs, root = _open_fs(url)
        self.local = isinstance(self.fs, LocalFileSystem)
        self.root = root.rstrip("/") or "/"
        if self.local and local_exists(self.root) and not Path(self.root).is_dir():
            raise RegistryError(f"registry root {self.root} is not a folder")
        self._check_bucket()

    def require_location(self) -> None:
        """For a reader: a local registry not created yet lies in an existing folder (a workspace
        before its first registration) and reads as empty; one whose folder is missing too is a
        mistyped path, and reading it as an empty registry says "no champion" where there is one
        (issue 32). Writers create the folders they need and do not call this."""
        parent = str(Path(self.root).parent)
        if self.local and not local_exists(self.root) and not local_exists(parent):
            raise RegistryError(f"registry {self.root} does not exist, nor its folder {parent}")

    @_backend_errors
    def _check_bucket(self) -> None:
        """An object store's bucket must exist: listing a missing one reads as an empty registry
        (`models list` would show no versions), and `ranker run` would only fail after training."""
        if self.local or not _is_object_store(self.fs):
            return
        bucket = self.root.lstrip("/").split("/", 1)[0]
        try:  # not fs.exists: s3fs answers False for a bucket it could not reach at all
            self.fs.ls(bucket, detail=False)
        except FileNotFoundError:
            raise RegistryError(f"registry {self.url}: bucket {bucket!r} does not exist") from None

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.root != "/" else f"/{rel}"

    @_backend_errors
    def exists(self, rel: str) -> bool:
        if self.local:
            return local_exists(self.path(rel))
        return bool(self.fs.exists(self.path(rel)))

    @_backend_errors
    def listdir(self, rel: str) -> list[str]:
        """Base names of the entries of a folder ([] when it does not exist)."""
        self.fs.invalidate_cache(self.path(rel))  # s3fs/gcsfs cache listings; the alias needs fresh ones
        try:
            entries = self.fs.ls(self.path(rel), detail=False)
        except FileNotFoundError:
            return []
        return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries)

    @_backend_errors
    def entries(self, rel: str) -> list[tuple[str, int, float | None]]:
        """(name, bytes, modified epoch seconds or None when the backend does not say) of the
        files in folder ``rel`` ([] when it does not exist)."""
        self.fs.invalidate_cache(self.path(rel))
        try:
            infos = self.fs.ls(self.path(rel), detail=True)
        except FileNotFoundError:
            return []
        out = []
        for info in infos:
            if info.get("type") == "directory":
                continue
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            out.append((name, int(info.get("size") or 0), _modified(info)))
        return sorted(out)

    @_backend_errors
    def remove(self, rel: str) -> None:
        """Delete the file ``rel`` (gone already is fine)."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.path(rel))

    @_backend_errors
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

    @_backend_errors
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace ``rel`` atomically."""
        if self.local:
            atomic_write_bytes(self.path(rel), data)
        else:  # object stores publish an object only when its upload completes
            self.fs.pipe_file(self.path(rel), data)

    @_backend_errors
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
            fd, tmp = new_temp_file(parent, Path(target).name)
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
            except OSError as exc:  # ENOSPC, EROFS: name the file, not the temp
                exc.filename = target
                raise
            finally:
                tmp.unlink(missing_ok=True)
        try:
            with self.fs.open(target, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False

    @_backend_errors
    def put_file(self, local_src: Path, rel: str) -> None:
        target = self.path(rel)
        if self.local:
            with atomic_path(target) as tmp:
                shutil.copyfile(local_src, tmp)
        else:
            self.fs.put_file(str(local_src), target)

    @_backend_errors
    def get_file(self, rel: str, local_dst: Path) -> None:
        if self.local:
            shutil.copyfile(self.path(rel), local_dst)
        else:
            self.fs.get_file(self.path(rel), str(local_dst))

    def remove_orphan_temps(self, rel: str, max_age_seconds: float = ORPHAN_TEMP_AGE_SECONDS) -> list[str]:
        """Delete temp files in folder ``rel`` that a killed local writer left (older than
        ``max_age_seconds``; younger ones may belong to a live writer). Object stores have none."""
        if not self.local:
            return []
        folder = Path(self.path(rel))
        if not folder.is_dir():
            return []
        removed = []
        cutoff = time.time() - max_age_seconds
        for entry in folder.iterdir():
            if not _ORPHAN_TEMP.match(entry.name):
                continue
            try:
                if entry.is_file() and entry.stat().st_mtime < cutoff:
                    entry.unlink()
                    removed.append(entry.name)
            except FileNotFoundError:  # another cleaner got it first
                continue
        if removed:
            log.info("removed %d orphan temp file(s) in %s: %s", len(removed), folder, ", ".join(removed))
        return removed

    @_backend_errors
    def sha256(self, rel: str) -> str:
        with self.fs.open(self.path(rel), "rb") as f:
            return sha256_fileobj(f)
