"""`ucsj cache`: stats, export, import, verify, clear."""

from __future__ import annotations

from pathlib import Path

import click

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    _where,
    cache_dir_option,
    claims_stdout,
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
    callback=claims_stdout,
    help="JSONL file to write: one entry a line, ordered by key (- for standard output).",
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
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),  # checked as inputs are
)
@cache_dir_option
def cache_import(files: tuple[Path, ...], cache_dir: Path | None) -> None:
    """Load entries from exported JSONL files (- for standard input), checking every key and
    response digest."""
    from ucsj.io import input_path

    for path in files:  # a missing file fails before the cache is created or changed
        input_path(path)
    with _open_cache(cache_dir, must_exist=False) as store:
        for path in files:
            count = store.import_file(path)
            console.info(f"imported {count} entries from {path}")


@cache.command("verify")
@cache_dir_option
def cache_verify(cache_dir: Path | None) -> None:
    """Re-hash every entry's request and response; report (and exit 3 on) any whose key does
    not match its request or whose response does not match its response digest (an edited
    response), and any row ucsj did not write."""
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


SHOWN_FAILURES = 1000  # failed lines listed one by one; the rest are counted


@cache.command("import-batch")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--requests",
    "requests_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The Batch API input file the batch answered (the --pending file of a collect run).",
)
@click.option(
    "--batch-id",
    default=None,
    help="Recorded in each entry's provenance. [default: the id `ucsj batch run` noted "
    "beside OUTPUT, if any]",
)
@cache_dir_option
def cache_import_batch(
    output: Path, requests_path: Path, batch_id: str | None, cache_dir: Path | None
) -> None:
    """Store a batch's answers (OpenAI Batch API output lines) as cache entries.

    Each answer's custom_id must name a request of --requests that re-hashes to it. Failed
    lines are listed with their reason and not stored: the next `--cache collect` run asks
    for them again. Exit 0 when every request was answered and stored, 3 otherwise.

    Example: ucsj cache import-batch out.jsonl --requests pending.jsonl
    """
    from ucsj.llm.batch import import_batch
    from ucsj.llm.batch_api import noted_batch_id

    with _open_cache(cache_dir, must_exist=False) as store:
        result = import_batch(
            store, output, requests_path, batch_id=batch_id or noted_batch_id(output)
        )
    for where, custom_id, reason in result.failed[:SHOWN_FAILURES]:
        console.err.print(f"{where}: {custom_id}: {reason}", markup=False)
    if len(result.failed) > SHOWN_FAILURES:
        console.err.print(
            f"… and {len(result.failed) - SHOWN_FAILURES} more failed lines", markup=False
        )
    console.info(
        f"stored {result.stored} answers from {output} ({result.known} already cached); "
        f"{len(result.failed)} failed lines, {len(result.unanswered)} requests unanswered"
    )
    if not result.ok:
        raise BackendError(
            f"{len(result.failed)} failed lines and {len(result.unanswered)} unanswered "
            f"requests were not stored; rerun with --cache collect to ask for them again"
        )
