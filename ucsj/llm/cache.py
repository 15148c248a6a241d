"""The content-addressed response cache on diskcache, and its JSONL export (fixtures).

Each entry is one JSON object: `key`, `request` (the key material), `response` (the raw body),
`response_digest` (sha256 of the response's canonical JSON) and `meta` (provenance). Keys and
values are stored as text only, by a diskcache `Disk` that never unpickles: a row of any other
kind (planted in somebody else's cache directory) is treated as corrupt, so opening a cache
cannot execute code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import diskcache

from ucsj.errors import InputError, StorageError
from ucsj.llm import record_memo
from ucsj.llm.request import cache_key, canonical_json

log = logging.getLogger("ucsj.cache")

DEFAULT_CACHE_DIR = "cache"
_LOCK_RETRIES = 50
_KEYS_PER_QUERY = 500  # under SQLite's oldest limit of 999 parameters


class CorruptEntry(Exception):
    """A cache row that is not what ucsj writes: a pickle, a stray file, a bad digest."""


class _PickledKey(bytes):
    """A row whose key was pickled: never loaded, only reported."""


class TextOnlyDisk(diskcache.Disk):
    """diskcache's serialisation restricted to text: string keys, string values. Reading a
    pickled key or value raises CorruptEntry instead of running pickle.load."""

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"cache keys are strings, not {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            return _PickledKey(bytes(key))
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if type(value) is not str:
            raise TypeError(f"cache values are JSON text, not {type(value).__name__}")
        return super().store(value, read, key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if mode == diskcache.core.MODE_PICKLE:
            raise CorruptEntry("a pickled value (ucsj never writes one); not loaded")
        if read:
            raise CorruptEntry("a file handle was asked for")
        if mode in (diskcache.core.MODE_TEXT, diskcache.core.MODE_BINARY):
            self._check_value_file(filename)
        return super().fetch(mode, filename, value, read)

    def _check_value_file(self, filename: str | None) -> None:
        """A value file must be a regular file inside the cache directory: a planted row could
        name /dev/zero, a FIFO or a file elsewhere."""
        if not filename or os.path.isabs(filename) or ".." in Path(filename).parts:
            raise CorruptEntry(f"its value file {filename!r} is outside the cache")
        try:
            mode = os.lstat(os.path.join(self._directory, filename)).st_mode
        except FileNotFoundError:
            raise CorruptEntry(f"its value file {filename} is missing") from None
        if not stat.S_ISREG(mode):
            raise CorruptEntry(f"its value file {filename} is not a regular file")


class CacheMode(StrEnum):
    READWRITE = "readwrite"  # read hits, record misses
    REFRESH = "refresh"  # ignore hits, record every response anew
    REPLAY = "replay"  # read hits, a miss is an error; never opens a connection
    OFF = "off"  # neither read nor write
    COLLECT = "collect"  # read hits, write each miss to a pending file; never opens a connection

    @property
    def reads(self) -> bool:
        return self in (CacheMode.READWRITE, CacheMode.REPLAY, CacheMode.COLLECT)

    @property
    def writes(self) -> bool:
        return self in (CacheMode.READWRITE, CacheMode.REFRESH)


def default_cache_dir() -> Path:
    return Path(os.environ.get("UCSJ_CACHE_DIR") or DEFAULT_CACHE_DIR)


@dataclass(frozen=True)
class CacheStats:
    directory: str
    entries: int
    bytes_on_disk: int
    models: dict[str, int]
    with_logprobs: int
    memo_lines: int = 0  # finished scores lines in the record memo


class ResponseCache:
    """A directory of cache entries shared safely by several processes."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._store = _open_store(
            self.directory,
            lambda: diskcache.Cache(
                str(self.directory),
                disk=TextOnlyDisk,
                timeout=120,  # SQLite busy timeout: writers wait for each other instead of failing
                eviction_policy="none",  # never drop a recording silently
                size_limit=2**62,
                cull_limit=0,
                # diskcache's defaults map 64 MB of the database and cache 32 MB of pages; with
                # them, memory grows with the cache instead of staying flat while streaming.
                sqlite_mmap_size=0,
                sqlite_cache_size=1024,
            ),
        )

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under `key`; None when there is none or it is corrupt (logged)."""
        try:
            return self.get_checked(key)
        except CorruptEntry as exc:
            log.warning("cache entry %s is corrupt (%s); treated as missing", key, exc)
            return None

    def get_checked(self, key: str) -> dict[str, Any] | None:
        """The entry stored under `key` (None when there is none); CorruptEntry when the row
        is not text ucsj wrote or its response fails its digest."""
        raw = _retry_locked(lambda: self._store.get(key))
        if raw is None:
            return None
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptEntry("its value is not UTF-8 text") from None
        if not isinstance(raw, str):
            raise CorruptEntry(f"its value is a {type(raw).__name__}, not JSON text")
        try:
            entry = json.loads(raw)
        except (RecursionError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise CorruptEntry(f"its value is not JSON ({exc})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("response"), dict):
            raise CorruptEntry("its value is not a cache entry")
        problem = digest_problem(entry)
        if problem:
            raise CorruptEntry(problem)
        return entry

    def put(self, entry: dict[str, Any]) -> None:
        text = canonical_json(with_digest(entry))
        _retry_locked(lambda: self._store.set(entry["key"], text))

    def add(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        """Store `entry` unless its key is already recorded; then return the recorded one.
        The first recording wins, so every process that asks ends up using the same answer.
        A corrupt recording does not win: it is replaced."""
        text = canonical_json(with_digest(entry))
        if _retry_locked(lambda: self._store.add(entry["key"], text)):
            return None
        recorded = self.get(entry["key"])
        if recorded is None:
            self.put(entry)
        return recorded

    def add_many(self, entries: list[dict[str, Any]]) -> int:
        """Store each entry whose key is not recorded yet, in one transaction; return how
        many were new (a batch import of a million answers is not a million commits). As in
        `add`, a corrupt recording does not win: it is replaced."""

        def store(entry: dict[str, Any]) -> bool:
            text = canonical_json(with_digest(entry))
            if self._store.add(entry["key"], text):
                return True
            if self.get(entry["key"]) is not None:
                return False
            self._store.set(entry["key"], text)
            return True

        def add_all() -> int:
            with self._store.transact():
                return sum(store(e) for e in entries)

        return _retry_locked(add_all)

    def __contains__(self, key: str) -> bool:
        return _retry_locked(lambda: key in self._store)

    def present(self, keys: Iterable[str]) -> set[str]:
        """Which of `keys` are stored, looked up in a few queries rather than one per key
        (the record memo checks every memoised line's keys on a rerun)."""
        wanted = sorted(set(keys))  # in index order: neighbouring lookups share pages
        found: set[str] = set()
        for start in range(0, len(wanted), _KEYS_PER_QUERY):
            chunk = wanted[start : start + _KEYS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key FROM Cache WHERE raw = 1 AND key IN ({marks})"
            found.update(
                row[0]
                for row in _retry_locked(lambda q=query, c=chunk: self._store._sql(q, c).fetchall())
            )
        return found

    def holds_all(self, keys: Iterable[str]) -> bool:
        """Whether every one of `keys` is stored: rows are counted, none read back (on a rerun
        every memoised line's keys are checked, and nearly always all are there)."""
        wanted = list(set(keys))  # distinct: a query counts a repeated key once
        found = 0
        for start in range(0, len(wanted), _KEYS_PER_QUERY):
            chunk = wanted[start : start + _KEYS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT count(*) FROM Cache WHERE raw = 1 AND key IN ({marks})"
            found += _retry_locked(lambda q=query, c=chunk: self._store._sql(q, c).fetchone()[0])
        return found == len(wanted)

    def __len__(self) -> int:
        return _retry_locked(lambda: len(self._store))

    def keys(self) -> list[str]:
        """Every key stored as text (rows with other keys are left out: see `verify`)."""
        return sorted(k for k in self._all_keys() if type(k) is str)

    def _all_keys(self) -> list[Any]:
        return _retry_locked(lambda: list(self._store.iterkeys()))

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every entry, ordered by key (a stable, diffable order)."""
        for key in self.keys():
            entry = self.get(key)
            if entry is not None:
                yield entry

    def export(self, path: str | Path) -> int:
        from ucsj.io import atomic_writer

        self.refuse_output_inside(path)
        count = 0
        with atomic_writer(path) as out:
            for entry in self.entries():
                out.write(canonical_json(with_digest(entry)) + "\n")
                count += 1
        return count

    def refuse_output_inside(self, path: str | Path) -> None:
        """Exit 2 when `path` would be written inside this cache's directory or onto one of
        its files by another name (a hard link): the cache's files are its inputs."""
        from ucsj.io import is_stdio, refuse_overwriting_inputs

        if is_stdio(path):
            return
        root = Path(os.path.realpath(self.directory))
        target = Path(os.path.realpath(path))
        if target == root or root in target.parents:
            raise InputError(
                f"is inside the cache directory {self.directory}; writing it there would "
                "damage the cache: choose another output",
                path=str(path),
            )
        refuse_overwriting_inputs([path], [p for p in root.iterdir() if p.is_file()])

    def import_entries(self, entries: Iterable[tuple[int, dict[str, Any]]], source: str) -> int:
        """Load (line number, entry) pairs after checking each one's key and response digest;
        return how many."""
        record_memo.check(self.directory)  # before anything is stored
        checked = []
        for line, entry in entries:
            problem = entry_problem(entry) or digest_problem(entry)
            if problem:
                raise InputError(problem, path=source, line=line)
            checked.append(entry)
        for entry in checked:
            self.put(entry)
        record_memo.invalidate(self.directory)  # an imported entry may replace a response
        return len(checked)

    def import_file(self, path: str | Path) -> int:
        from ucsj.io import read_json_lines

        return self.import_entries(read_json_lines(path), str(path))

    def verify(self) -> list[tuple[str, str]]:
        """(key, problem) for every entry that does not re-hash to its key, fails its response
        digest or is not a row ucsj wrote (a pickle, say: reported, never loaded)."""
        bad = []
        for key in self._all_keys():
            if isinstance(key, _PickledKey):
                bad.append((f"<pickled key, {len(key)} bytes>", "a pickled key; not loaded"))
            elif type(key) is not str:
                bad.append((f"<{type(key).__name__} key>", "a key that is not text"))
        for key in self.keys():
            try:
                entry = self.get_checked(key)
            except CorruptEntry as exc:
                bad.append((key, f"corrupt entry: {exc}"))
                continue
            problem = entry_problem(entry) if entry is not None else "entry vanished"
            if problem is None and entry["key"] != key:
                problem = f"stored under {key} but names key {entry['key']}"
            if problem:
                bad.append((key, problem))
        return bad

    def stats(self) -> CacheStats:
        models: dict[str, int] = {}
        with_logprobs = 0
        count = 0
        for entry in self.entries():
            count += 1
            model = entry.get("request", {}).get("model", "?")
            models[model] = models.get(model, 0) + 1
            with_logprobs += bool(entry.get("meta", {}).get("has_logprobs"))
        return CacheStats(
            str(self.directory),
            count,
            _retry_locked(self._store.volume),
            dict(sorted(models.items())),
            with_logprobs,
            record_memo.line_count(self.directory),
        )

    def clear(self) -> int:
        record_memo.clear(self.directory)
        return _retry_locked(self._store.clear)


def make_entry(
    request_material: dict[str, Any],
    response: dict[str, Any],
    meta: dict[str, Any],
    key: str | None = None,
) -> dict[str, Any]:
    """A cache entry; `key` saves re-hashing when the caller already knows it."""
    return {
        "key": key or cache_key(request_material),
        "request": request_material,
        "response": response,
        "meta": meta,
    }


def response_digest(response: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(response).encode("utf-8")).hexdigest()


def with_digest(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` carrying the digest of its response (computed when it has none)."""
    if "response_digest" in entry:
        return entry
    return {**entry, "response_digest": response_digest(entry.get("response"))}


def digest_problem(entry: Any) -> str | None:
    """Why an entry's response does not match its digest; None when it does or when the entry
    predates digests (recorded by an older ucsj: accepted, and given one when stored)."""
    if not isinstance(entry, dict) or "response_digest" not in entry:
        return None
    actual = response_digest(entry.get("response"))
    if entry["response_digest"] != actual:
        return (
            f"the response was edited: its digest is {entry['response_digest']} but the "
            f"response hashes to {actual}"
        )
    return None


def entry_problem(entry: Any) -> str | None:
    """Why an entry is not a valid cache entry, or None when it is."""
    if not isinstance(entry, dict):
        return "cache entry is not a JSON object"
    for name in ("key", "request", "response"):
        if name not in entry:
            return f"cache entry has no '{name}'"
    if not isinstance(entry["request"], dict):
        return "cache entry 'request' is not an object"
    actual = cache_key(entry["request"])
    if actual != entry["key"]:
        return f"key {entry['key']} does not match its request (re-hashes to {actual})"
    return None


def _open_store(directory: Path, opener: Any) -> Any:
    """Open the diskcache store, naming the directory and what to do when it cannot be."""
    try:
        return _retry_locked(opener)
    except StorageError as exc:
        raise StorageError(f"cannot open the response cache {directory}: {exc}") from None
    except OSError as exc:
        raise StorageError(
            f"cannot open the response cache {directory}: {exc.strerror or exc} "
            "(check the directory's permissions and free space, or choose another --cache-dir)"
        ) from None


CORRUPT_HINT = (
    "move the cache directory aside (or run `ucsj cache clear`) and rerun, importing an "
    "exported fixture if you have one"
)


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether a SQLite error says the database file itself is damaged."""
    text = str(exc)
    return isinstance(exc, sqlite3.DatabaseError) and any(
        sign in text
        for sign in ("not a database", "malformed", "corrupt", "no such table", "no such column")
    )


def _storage_error(exc: sqlite3.Error) -> StorageError:
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return StorageError(
            f"{text}: the cache directory is read-only (choose another --cache-dir)"
        )
    if "full" in text or "disk I/O error" in text:
        return StorageError(
            f"{text}: the disk may be full; free some space or choose another --cache-dir"
        )
    if is_damage(exc):
        return StorageError(f"{text}: the cache database is damaged; {CORRUPT_HINT}")
    return StorageError(f"cache database error: {text}")


def _retry_locked(operation: Any) -> Any:
    """Run a diskcache operation, waiting out "database is locked" from other processes.

    The SQLite busy timeout covers most contention; schema creation while another process
    opens the same fresh directory can still raise, so retry with a short back-off.
    """
    for attempt in range(_LOCK_RETRIES):
        try:
            return operation()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == _LOCK_RETRIES - 1:
                raise _storage_error(exc) from None
            time.sleep(min(0.05 * (attempt + 1), 1.0))
        except sqlite3.Error as exc:
            raise _storage_error(exc) from None
        except OSError as exc:  # a value file diskcache writes beside the database
            raise StorageError(
                f"cannot write the response cache: {exc.strerror or exc}"
                + (": free some space or choose another --cache-dir" if exc.errno == 28 else "")
            ) from None
    raise AssertionError("unreachable")
