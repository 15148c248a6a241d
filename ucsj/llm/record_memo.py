"""Finished output lines, keyed by everything they are computed from, beside the response cache.

A rerun of `score` on unchanged inputs would rebuild every prompt, hash it, read and parse each
cached response and each answer, only to write the same line again. The memo skips that: its
key digests the input line, the task, the criteria, the scoring settings and ucsj's own code
and templates; its value is the output line, with a digest and the cache keys of the
responses it was computed from (ucsj/scoring.py, ScoredLine.to_memo): a value that fails its
digest, cannot be parsed, or whose responses have left the cache is not used. A line is computed
from responses as the cache holds them (the client adopts the first recording of a request), so
it agrees with the cache.

Anything that can change a recorded response (a `--cache refresh` run, `cache import`, `cache
clear`) empties the memo and advances its generation; a process that opened the memo before
that keeps its old generation, so what it writes afterwards is never read by later runs.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from importlib import resources
from pathlib import Path

from ucsj.errors import StorageError

log = logging.getLogger("ucsj.memo")

FILE_NAME = "records.sqlite3"
MEMO_SCHEMA = 3  # 2: values carry a digest and their cache keys; 3: a SHA-256 one


class RecordMemo:
    def __init__(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        self._db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS memo "
            "(key BLOB PRIMARY KEY, generation INTEGER NOT NULL, value TEXT NOT NULL)"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('generation', 0)")
        self.generation = self._current_generation()

    def _current_generation(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE name = 'generation'").fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RecordMemo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Reading and filling the memo is best effort: a failure (a full disk, a read-only
    # directory) is logged once and the run goes on without it, computing every line.
    usable = True

    def get_many(self, keys: list[bytes]) -> dict[bytes, str]:
        """The stored lines among `keys` (one query for the batch)."""
        if not keys or not self.usable:
            return {}
        marks = ",".join("?" * len(keys))
        try:
            rows = self._db.execute(
                f"SELECT key, value FROM memo WHERE generation = ? AND key IN ({marks})",
                [self.generation, *keys],
            )
            return dict(rows)
        except sqlite3.Error as exc:
            self._give_up(exc)
            return {}

    def put_many(self, items: Iterable[tuple[bytes, str]]) -> None:
        rows = [(key, self.generation, value) for key, value in items]
        if not rows or not self.usable:
            return
        try:
            with self._transaction():
                self._db.executemany("INSERT OR REPLACE INTO memo VALUES (?, ?, ?)", rows)
        except sqlite3.Error as exc:
            self._give_up(exc)

    def _give_up(self, exc: sqlite3.Error) -> None:
        log.warning("record memo %s unusable (%s); computing every line", self.path, exc)
        self.usable = False

    def invalidate(self) -> None:
        """Forget every line and advance the generation (recorded responses may change)."""
        with self._transaction():
            self._db.execute("UPDATE meta SET value = value + 1 WHERE name = 'generation'")
            self._db.execute("DELETE FROM memo")
        self.generation = self._current_generation()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM memo").fetchone()[0])

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def invalidate(directory: str | Path) -> None:
    """Empty the memo of a cache directory, if it has one."""
    if (Path(directory) / FILE_NAME).exists():
        with _opened(directory) as memo:
            memo.invalidate()


def check(directory: str | Path) -> None:
    """Raise StorageError now when the memo of a cache directory is damaged (before a command
    changes the cache and then could not invalidate the memo)."""
    if (Path(directory) / FILE_NAME).exists():
        with _opened(directory):
            pass


def clear(directory: str | Path) -> None:
    """Empty the memo, or delete it when it is damaged: the next run builds a new one."""
    try:
        invalidate(directory)
    except StorageError as exc:
        if not getattr(exc, "damaged", False):
            raise
        log.warning("the record memo was damaged; deleted it (the next run rebuilds it)")
        for suffix in ("", "-wal", "-shm"):
            (Path(directory) / (FILE_NAME + suffix)).unlink(missing_ok=True)


def line_count(directory: str | Path) -> int:
    """How many lines the memo of a cache directory holds (0 without one)."""
    if not (Path(directory) / FILE_NAME).exists():
        return 0
    with _opened(directory) as memo:
        return len(memo)


@contextmanager
def _opened(directory: str | Path) -> Iterator[RecordMemo]:
    """The memo, a SQLite error named after it: a damaged file says what to do about it."""
    from ucsj.llm.cache import is_damage

    path = Path(directory) / FILE_NAME
    try:
        with RecordMemo(directory) as memo:
            yield memo
    except sqlite3.Error as exc:
        if is_damage(exc):
            error = StorageError(
                f"{exc}: the record memo {path} is damaged; move the cache directory aside, "
                "or delete that file (it only speeds up reruns; the next run rebuilds it)"
            )
            error.damaged = True  # type: ignore[attr-defined]
            raise error from None
        raise StorageError(f"record memo {path}: {exc}") from None


@cache
def code_digest() -> bytes:
    """A digest of ucsj's source and templates: any change to how a line is computed (prompts,
    answer parsing, record layout) gives new keys."""
    digest = hashlib.sha256(f"memo-schema {MEMO_SCHEMA}".encode())
    package = resources.files("ucsj")
    for path in sorted(_package_files(package), key=str):
        digest.update(str(path.relative_to(package)).encode())  # type: ignore[arg-type]
        digest.update(path.read_bytes())
    return digest.digest()


def _package_files(root: object) -> list[Path]:
    base = Path(str(root))
    return [p for p in base.rglob("*") if p.suffix in (".py", ".txt", ".toml") and p.is_file()]


def memo_key(context: bytes, line: str) -> bytes:
    return hashlib.blake2b(line.encode("utf-8"), digest_size=20, key=context[:64]).digest()
