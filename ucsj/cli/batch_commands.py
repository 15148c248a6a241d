"""`ucsj batch run`: a pending file through an endpoint's Files and Batches API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ucsj import console
from ucsj.cli.base import CONTEXT, cli


@cli.group(context_settings=CONTEXT)
def batch() -> None:
    """Answer pending requests with an endpoint's batch engine (see README, Large runs)."""


@batch.command("run")
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Batch API output file to write (answers, then the error file's lines); the batch id "
    "is noted beside it as OUTPUT.batch.json.",
)
@click.option(
    "--base-url",
    envvar="OPENAI_BASE_URL",
    default="https://api.openai.com/v1",
    show_default=True,
    help="Endpoint serving /files and /batches (OpenAI, a LiteLLM proxy). Env: OPENAI_BASE_URL.",
)
@click.option(
    "--poll",
    "poll_s",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds before the first status poll; the wait grows 1.5x per poll up to 5 minutes.",
)
@click.option(
    "--completion-window",
    default="24h",
    show_default=True,
    help="The batch's completion window, as the endpoint names it.",
)
def batch_run(
    input_path: Path, output: Path, base_url: str, poll_s: float, completion_window: str
) -> None:
    """Upload INPUT (a --pending file), create a batch, poll it and download its answers.

    Rerunning after an interruption resumes the same batch (its id is noted beside OUTPUT).
    Then: ucsj cache import-batch OUTPUT --requests INPUT. The key comes from OPENAI_API_KEY.

    Example: ucsj batch run pending.jsonl -o answers.jsonl
    """
    from ucsj.llm.batch_api import BatchSettings, run_batch

    settings = BatchSettings(
        base_url=base_url,
        api_key=os.environ.get("OPENAI_API_KEY"),
        poll_s=poll_s,
        poll_max_s=max(poll_s, 300.0),
        completion_window=completion_window,
    )

    def progress(batch: dict[str, Any]) -> None:
        counts = batch.get("request_counts") or {}
        console.info(
            f"batch {batch.get('id')}: {batch.get('status')}, "
            f"{counts.get('completed', 0)} done, {counts.get('failed', 0)} failed "
            f"of {counts.get('total', '?')}"
        )

    outcome = run_batch(input_path, output, settings, on_progress=progress)
    console.info(
        f"batch {outcome.batch_id} completed: {outcome.lines} answer lines in {output}; next: "
        f"ucsj cache import-batch {output} --requests {input_path}"
    )
