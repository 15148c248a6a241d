"""Streaming JSONL reading, input spooling and safe output writing.

`-` means standard input where a command reads and standard output where it writes, in every
command. Inputs that can be read only once (`-`, a pipe, a FIFO, `/dev/stdin`, `<(...)`) are
copied once to a temporary file, since commands read their input more than once (validate,
then stream). Outputs are written atomically when they are regular files (through symlinks,
to their target); character devices and FIFOs are written directly.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ucsj.errors import InputError, StorageError
from ucsj.llm.request import canonical_json

STDIO = "-"
STDIN_NAME = "standard input"
_SPOOL_CHUNK = 1 << 20


def is_stdio(path: str | Path | None) -> bool:
    return path is not None and str(path) == STDIO


def display_name(path: str | Path) -> str:
    """How messages name an input or output."""
    return STDIN_NAME if is_stdio(path) else str(path)


# -- inputs --------------------------------------------------------------------------------

_spools: dict[str, Path] = {}
_spool_dir: str | None = None


def input_path(path: str | Path) -> Path:
    """A path that can be opened any number of times: a regular file (or a directory) as it
    is; `-` and other one-shot inputs copied once to a temporary file, on their first use."""
    name = str(path)
    if name in _spools:
        return _spools[name]
    if name == STDIO:
        return _spool(name, sys.stdin.buffer)
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        raise InputError("file not found", path=name) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=name) from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return Path(path)
    try:
        source = open(name, "rb")  # noqa: SIM115  (a FIFO blocks here until a writer opens it)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=name) from None
    with source:
        return _spool(name, source)


def _spool(name: str, source: IO[bytes]) -> Path:
    global _spool_dir
    if _spool_dir is None:
        _spool_dir = tempfile.mkdtemp(prefix="ucsj-input-")
        atexit.register(release_inputs)
    target = Path(_spool_dir) / f"{len(_spools)}.input"
    try:
        with open(target, "wb") as out:
            shutil.copyfileobj(source, out, _SPOOL_CHUNK)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=display_name(name)) from None
    _spools[name] = target
    return target


def release_inputs() -> None:
    """Delete the copies of one-shot inputs (the CLI does at exit; so does the interpreter)."""
    global _spool_dir
    _spools.clear()
    if _spool_dir is not None:
        shutil.rmtree(_spool_dir, ignore_errors=True)
        _spool_dir = None


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """(device, inode) of what `path` names, following symlinks; None for `-` or nothing."""
    if is_stdio(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (provenance, a batch's input)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    return digest.hexdigest()


def refuse_overwriting_inputs(
    outputs: Iterable[str | Path | None], inputs: Iterable[str | Path | None]
) -> None:
    """Exit 2 before any work when an output is the same file as an input (by device and
    inode, so links and other spellings of one file count)."""
    known = {}
    for item in inputs:
        if item is not None and (identity := file_identity(item)) is not None:
            known.setdefault(identity, item)
    for output in outputs:
        if output is None:
            continue
        identity = file_identity(output)
        if identity is not None and identity in known:
            raise InputError(
                f"is also an input ({known[identity]}); writing it would destroy that input: "
                "choose another output",
                path=str(output),
            )


def read_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line, streaming.

    Invalid UTF-8 or JSON raises InputError naming the file and line.
    """
    for number, text in read_text_lines(path):
        yield number, parse_json_line(text, display_name(path), number)


def read_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) for each non-blank line, decoded, streaming."""
    name = display_name(path)
    try:
        handle = input_path(path).open("rb")
    except FileNotFoundError:
        raise InputError("file not found", path=name) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a JSONL file", path=name) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=name) from None
    with handle:
        number = 0
        while True:
            try:
                raw = handle.readline()
            except OSError as exc:  # an I/O error mid-file (a failing disk, a /proc file)
                raise InputError(
                    f"cannot read: {exc.strerror}", path=name, line=number + 1
                ) from None
            if not raw:
                return
            number += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"bytes are not UTF-8 (at byte {exc.start} of the line)",
                    path=name,
                    line=number,
                ) from None
            if number == 1:
                text = text.removeprefix("\ufeff")
            if text.strip():
                yield number, text


# A JSON escape of a UTF-16 surrogate: only then can a parsed string hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json_line(text: str, path: str, line: int) -> Any:
    return parse_json(text, path, line)


def parse_json(text: str, path: str, line: int | None = None) -> Any:
    """Parse JSON text, refusing what later stages could not handle: numbers too long to
    convert, nesting too deep to walk, and strings holding lone surrogates (they cannot be
    written as UTF-8)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=where
        ) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path=path, line=line) from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise InputError(f"invalid JSON: {exc}", path=path, line=line) from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            canonical_json(value).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(
                "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text",
                path=path,
                line=line,
            ) from None
    return value


def dump_json_line(obj: Any) -> str:
    """One JSONL line: canonical JSON, so reruns write byte-identical files."""
    return canonical_json(obj) + "\n"


def read_json(path: str | Path, what: str) -> Any:
    name = display_name(path)
    try:
        data = input_path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} file not found", path=name) from None
    except IsADirectoryError:
        raise InputError(f"is a directory, expected a {what} file", path=name) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{what} file is not UTF-8", path=name) from None
    return parse_json(text, name)


# -- outputs -------------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write `path` safely: `-` is standard output; a character device or a FIFO is written
    directly; anything else through a temporary file beside the (symlink-resolved) target,
    renamed over it only on success, so an exception or an interrupt leaves no partial output.
    """
    binary = "b" in mode
    if is_stdio(path):
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    path = Path(path)
    with _output_errors(path):
        kind = _existing_kind(path)
    if kind is not None and not stat.S_ISREG(kind) and not stat.S_ISDIR(kind):
        with _output_errors(path), _open_direct(path, mode) as out:
            yield out
        return
    target = Path(os.path.realpath(path))  # through symlinks: the link stays, its target changes
    with _output_errors(path):
        directory = target.parent
        directory.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target)
        fd, tmp = tempfile.mkstemp(
            prefix=f"{_temp_prefix(target)}{os.getpid()}.", suffix=".tmp", dir=directory
        )
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual permissions
        encoding = None if binary else "utf-8"
        out = os.fdopen(fd, mode, encoding=encoding, newline=None if binary else "\n")
        try:
            try:
                yield out
            except OSError as exc:
                if exc.errno in _FULL:
                    raise _disk_full(path, exc) from None
                raise
            with _output_errors(path):
                out.flush()
                os.fsync(out.fileno())
        finally:
            # After a failed write, closing would try to flush the rest again and replace
            # the clear error with a bare one; the temporary is deleted anyway.
            with contextlib.suppress(OSError):
                out.close()
        with _output_errors(path):
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _existing_kind(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _open_direct(path: Path, mode: str) -> Iterator[IO[Any]]:
    binary = "b" in mode
    with open(path, mode, encoding=None if binary else "utf-8") as out:
        yield out


@contextlib.contextmanager
def _output_errors(path: Path) -> Iterator[None]:
    """OS errors while writing an output, named after the output (never the temporary)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _FULL:
            raise _disk_full(path, exc) from None
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise InputError(
                f"cannot write: {exc.strerror.lower() if exc.strerror else 'permission denied'}",
                path=str(path),
            ) from None
        if exc.errno == errno.EISDIR:
            raise InputError("is a directory, expected a file", path=str(path)) from None
        raise StorageError(f"{path}: cannot write: {exc.strerror or exc}") from None


# A full disk, a quota, a file-size limit: the output cannot grow.
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _disk_full(path: Path, exc: OSError) -> StorageError:
    reason = (exc.strerror or "no space left on the device").lower()
    return StorageError(f"{path}: cannot write: {reason}; the output was left as it was")


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def remove_stale_temporaries(target: Path) -> None:
    """Delete temporaries of `target` that an earlier, killed run left behind: those named
    after a process that no longer runs (or written before the pid was part of the name)."""
    prefix = _temp_prefix(target)
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid = name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and _process_alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(target.parent / name)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def open_output(path: str | Path | None, *, hold: bool = False) -> Iterator[IO[str]]:
    """A JSONL output: standard output for None or "-", else written as `atomic_writer` does.

    `hold` keeps standard output back until the block succeeds, as a file is (a
    `--cache collect` run that ends with requests pending prints no lines; a conversion that
    meets a bad row prints none either)."""
    if hold and (path is None or is_stdio(path)):
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as held:
            yield held
            held.seek(0)
            while chunk := held.read(1 << 16):
                sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    with atomic_writer(STDIO if path is None else path) as out:
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
