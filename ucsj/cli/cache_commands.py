"""`ucsj cache`: stats, export, import, verify, clear."""

from __future__ import annotations

from pathlib import Path

import click

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    _where,
    cache_dir_option,
    cli,
)
from ucsj.errors import BackendError, InputError
from ucsj.llm import ResponseCache
from ucsj.llm.cache import default_cache_dir


def _open_cache(cache_dir: Path | None, must_exist: bool = True) -> ResponseCache:
    directory = cache_dir or default_cache_dir()
    if must_exist and not directory.is_dir():
        raise InputError(f"no cache at {directory}")
    return ResponseCache(directory)


@cli.group(context_settings=CONTEXT)
def cache() -> None:
    """Inspect, export, import, verify or clear the response cache."""


@cache.command("stats")
@cache_dir_option
def cache_stats(cache_dir: Path | None) -> None:
    """Count entries by model and show the size on disk."""
    with _open_cache(cache_dir) as store:
        stats = store.stats()
    console.out.print(f"cache: {stats.directory}", markup=False)
    console.out.print(
        f"entries: {stats.entries} ({stats.with_logprobs} with logprobs), "
        f"{stats.bytes_on_disk / 1e6:.1f} MB on disk",
        markup=False,
    )
    for model, count in stats.models.items():
        console.out.print(f"  {model}: {count}", markup=False)
    console.out.print(f"record memo: {stats.memo_lines} scores lines", markup=False)


@cache.command("export")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSONL file to write: one entry a line, ordered by key.",
)
@cache_dir_option
def cache_export(output: Path, cache_dir: Path | None) -> None:
    """Write every entry as JSONL (fixtures): stable order, one per line, diffable."""
    with _open_cache(cache_dir) as store:
        count = store.export(output)
    console.info(f"exported {count} entries to {_where(output)}")


@cache.command("import")
@click.argument(
    "files",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
)
@cache_dir_option
def cache_import(files: tuple[Path, ...], cache_dir: Path | None) -> None:
    """Load entries from exported JSONL files (- for standard input), checking every key and
    response digest."""
    with _open_cache(cache_dir, must_exist=False) as store:
        for path in files:
            count = store.import_file(path)
            console.info(f"imported {count} entries from {path}")


@cache.command("verify")
@cache_dir_option
def cache_verify(cache_dir: Path | None) -> None:
    """Re-hash every entry's request; report (and exit 3 on) any whose key does not match."""
    with _open_cache(cache_dir) as store:
        bad = store.verify()
        total = len(store)
    for key, problem in bad:
        console.err.print(f"{key}: {problem}", markup=False)
    if bad:
        raise BackendError(f"{len(bad)} of {total} cache entries failed verification")
    console.out.print(f"{total} entries verified", markup=False)


@cache.command("clear")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@cache_dir_option
def cache_clear(yes: bool, cache_dir: Path | None) -> None:
    """Delete every entry (export first to keep them)."""
    with _open_cache(cache_dir) as store:
        if not yes and not click.confirm(f"delete all {len(store)} entries of {store.directory}?"):
            console.info("nothing deleted")  # a declined confirmation is not an error: exit 0
            return
        count = store.clear()
    console.info(f"deleted {count} entries")
