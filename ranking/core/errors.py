"""Errors the CLI turns into a clear one-line message and a non-zero exit code."""


class RankerError(Exception):
    """A problem with input, configuration or state that the user can fix; exit code 2."""

    exit_code = 2


class DataValidationError(RankerError):
    """Input data failed a validation check (missing days, schema drift, row loss, ...)."""


class TrainingFailed(RankerError):
    """Training stopped (non-finite loss, ...); no final checkpoint was written."""


class RegistryError(RankerError):
    """Model registry problem: unknown version, checksum mismatch, alias conflict."""
