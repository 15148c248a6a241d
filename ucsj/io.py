"""Streaming JSONL reading and atomic file writing."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ucsj.errors import InputError
from ucsj.llm.request import canonical_json


def read_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line, streaming.

    Invalid UTF-8 or JSON raises InputError naming the file and line.
    """
    for number, text in read_text_lines(path):
        yield number, parse_json_line(text, str(path), number)


def read_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) for each non-blank line, decoded, streaming."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a JSONL file", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=str(path)) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"bytes are not UTF-8 (at byte {exc.start} of the line)",
                    path=str(path),
                    line=number,
                ) from None
            if number == 1:
                text = text.removeprefix("\ufeff")
            if text.strip():
                yield number, text


def parse_json_line(text: str, path: str, line: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=line
        ) from None


def dump_json_line(obj: Any) -> str:
    """One JSONL line: canonical JSON, so reruns write byte-identical files."""
    return canonical_json(obj) + "\n"


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside `path` and rename it over `path` only on success.

    An exception or an interrupt leaves no partial output behind.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual permissions
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding, newline=None if "b" in mode else "\n") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def open_output(path: str | Path | None, *, hold: bool = False) -> Iterator[IO[str]]:
    """A JSONL output: standard output for None or "-", else a file written atomically.

    `hold` keeps standard output back until the block succeeds, as a file is (a
    `--cache collect` run that ends with requests pending prints no lines)."""
    if (path is None or str(path) == "-") and hold:
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as held:
            yield held
            held.seek(0)
            while chunk := held.read(1 << 16):
                sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    if path is None or str(path) == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_writer(path) as out:
        yield out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, obj: Any) -> None:
    """Write a human-readable JSON artifact atomically."""
    with atomic_writer(path) as out:
        json.dump(obj, out, ensure_ascii=False, indent=2, sort_keys=False)
        out.write("\n")


def read_json(path: str | Path, what: str) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} file not found", path=str(path)) from None
    except UnicodeDecodeError:
        raise InputError(f"{what} file is not UTF-8", path=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
