"""The content-addressed response cache on diskcache, and its JSONL export (fixtures).

Each entry is one JSON object: `key`, `request` (the key material), `response` (the raw body)
and `meta` (provenance). Values are stored as JSON text, never pickled, so opening somebody
else's cache directory cannot execute code.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import diskcache

from ucsj.errors import InputError
from ucsj.llm import record_memo
from ucsj.llm.request import cache_key, canonical_json

DEFAULT_CACHE_DIR = "cache"
_LOCK_RETRIES = 50


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
        self._store = _retry_locked(
            lambda: diskcache.Cache(
                str(self.directory),
                timeout=120,  # SQLite busy timeout: writers wait for each other instead of failing
                eviction_policy="none",  # never drop a recording silently
                size_limit=2**62,
                cull_limit=0,
                # diskcache's defaults map 64 MB of the database and cache 32 MB of pages; with
                # them, memory grows with the cache instead of staying flat while streaming.
                sqlite_mmap_size=0,
                sqlite_cache_size=1024,
            )
        )

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> dict[str, Any] | None:
        raw = _retry_locked(lambda: self._store.get(key))
        return json.loads(raw) if raw is not None else None

    def put(self, entry: dict[str, Any]) -> None:
        text = canonical_json(entry)
        _retry_locked(lambda: self._store.set(entry["key"], text))

    def add(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        """Store `entry` unless its key is already recorded; then return the recorded one.
        The first recording wins, so every process that asks ends up using the same answer."""
        text = canonical_json(entry)
        if _retry_locked(lambda: self._store.add(entry["key"], text)):
            return None
        return self.get(entry["key"])

    def add_many(self, entries: list[dict[str, Any]]) -> int:
        """Store each entry whose key is not recorded yet, in one transaction; return how
        many were new (a batch import of a million answers is not a million commits)."""

        def add_all() -> int:
            with self._store.transact():
                return sum(bool(self._store.add(e["key"], canonical_json(e))) for e in entries)

        return _retry_locked(add_all)

    def __contains__(self, key: str) -> bool:
        return _retry_locked(lambda: key in self._store)

    def __len__(self) -> int:
        return _retry_locked(lambda: len(self._store))

    def keys(self) -> list[str]:
        return sorted(_retry_locked(lambda: list(self._store.iterkeys())))

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every entry, ordered by key (a stable, diffable order)."""
        for key in self.keys():
            entry = self.get(key)
            if entry is not None:
                yield entry

    def export(self, path: str | Path) -> int:
        from ucsj.io import atomic_writer

        count = 0
        with atomic_writer(path) as out:
            for entry in self.entries():
                out.write(canonical_json(entry) + "\n")
                count += 1
        return count

    def import_entries(self, entries: Iterable[tuple[int, dict[str, Any]]], source: str) -> int:
        """Load (line number, entry) pairs after checking each one's key; return how many."""
        checked = []
        for line, entry in entries:
            problem = entry_problem(entry)
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
        """(key, problem) for every entry that does not re-hash to its key or is unreadable."""
        bad = []
        for key in self.keys():
            try:
                entry = self.get(key)
            except (json.JSONDecodeError, TypeError) as exc:
                bad.append((key, f"unreadable entry: {exc}"))
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
        record_memo.invalidate(self.directory)
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
                raise
            time.sleep(min(0.05 * (attempt + 1), 1.0))
    raise AssertionError("unreachable")
