"""Errors that carry the exit code the CLI documents.

0 ok, 1 a quality gate failed, 2 usage or input error, 3 backend or runtime error.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_BACKEND = 3


class UcsjError(Exception):
    """Base error; `exit_code` is what the CLI exits with."""

    exit_code = EXIT_BACKEND


class InputError(UcsjError):
    """Bad input: a file, a record, a field or an option. Exit 2."""

    exit_code = EXIT_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = str(path)
            if line is not None:
                where += f":{line}"
        if field is not None:
            where += f" field '{field}'" if where else f"field '{field}'"
        super().__init__(f"{where}: {message}" if where else message)
        self.path, self.line, self.field = path, line, field


class BackendError(UcsjError):
    """The LLM endpoint failed, timed out or answered something unusable. Exit 3."""

    exit_code = EXIT_BACKEND


class CacheMissError(BackendError):
    """Replay mode needed a response the cache does not hold."""


class StorageError(UcsjError):
    """A file or the cache could not be written or read at run time (a full disk, a corrupt
    database). Exit 3."""

    exit_code = EXIT_BACKEND


class GateFailed(UcsjError):
    """A quality gate failed. Exit 1."""

    exit_code = EXIT_GATE
