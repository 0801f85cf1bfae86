"""Errors the CLI turns into a clear one-line message and a non-zero exit code."""

from __future__ import annotations

import errno

# a crash of ours (a bug, not a user-fixable error): neither 1 ("gate rejected") nor 2 (user
# error), so a caller that branches on the exit code never reads a traceback as a decision; every
# process of ours (the `ranker` command, a torchrun worker) exits with it
EXIT_CRASH = 70  # EX_SOFTWARE (sysexits.h)


class RankerError(Exception):
    """A problem with input, configuration or state that the user can fix; exit code 2."""

    exit_code = 2


class DataValidationError(RankerError):
    """Input data failed a validation check (missing days, schema drift, row loss, ...)."""


class TrainingFailed(RankerError):
    """Training stopped (non-finite loss, ...); no final checkpoint was written."""


class RegistryError(RankerError):
    """Model registry problem: unknown version, checksum mismatch, alias conflict."""


# errno values that are the environment's, not the code's: the user fixes them (free space,
# permissions, a writable mount, the right path); anything else stays a traceback
_USER_ERRNO = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "not a folder (a path component is a file)",
    errno.EISDIR: "is a folder (a file was expected there)",
    errno.ENAMETOOLONG: "file name too long",
}


def as_user_error(exc: BaseException) -> RankerError | None:
    """The one mapping of exceptions to user-fixable errors (exit 2, one line): RankerError as
    it is, an OSError of the environment (disk full, read-only, permissions) naming its path;
    None for anything else (a bug of ours: the caller lets it propagate as a traceback)."""
    if isinstance(exc, RankerError):
        return exc
    if isinstance(exc, OSError) and exc.errno in _USER_ERRNO:
        what = _USER_ERRNO[exc.errno]
        where = exc.filename if exc.filename is not None else "(path not reported)"
        code = errno.errorcode.get(exc.errno, str(exc.errno))
        return RankerError(f"{what} ({code}): {where}")
    return None
