"""The command group, its shared options and small helpers."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ucsj import __version__, console
from ucsj.llm import CacheMode, LLMSettings
from ucsj.llm.cache import default_cache_dir
from ucsj.llm.client import DEFAULT_MODEL

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="ucsj")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors and results.")
@click.option("-v", "--verbose", is_flag=True, help="Log retries and other details.")
def cli(quiet: bool, verbose: bool) -> None:
    """ucsj: a multilingual LLM judge that learns from English labels.

    Exit codes: 0 ok, 1 a quality gate failed, 2 usage or input error, 3 backend or runtime
    error. The API key is read from OPENAI_API_KEY only and is never written anywhere.
    """
    console.configure(quiet=quiet, verbose=verbose)


def llm_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The shared LLM and cache options; passes `settings: LLMSettings` to the command."""
    options = [
        click.option(
            "--model",
            envvar="UCSJ_MODEL",
            default=DEFAULT_MODEL,
            show_default=True,
            help="Model name; pin a snapshot (gpt-4o-2024-08-06, not gpt-4o). Env: UCSJ_MODEL.",
        ),
        click.option(
            "--base-url",
            envvar="OPENAI_BASE_URL",
            default=None,
            help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1. "
            "Env: OPENAI_BASE_URL. [default: http://127.0.0.1:8080/v1]",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(min=1),
            default=8,
            show_default=True,
            help="Requests in flight at once.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=60.0,
            show_default=True,
            help="Seconds to wait for one response.",
        ),
        click.option(
            "--max-retries",
            type=click.IntRange(min=0),
            default=5,
            show_default=True,
            help="Retries on 408, 429, 5xx, timeouts and connection errors.",
        ),
        click.option(
            "--cache",
            "cache_mode",
            type=click.Choice([m.value for m in CacheMode]),
            default="readwrite",
            show_default=True,
            help="readwrite: use and record; refresh: re-ask and record; replay: "
            "cache only, a miss is an error; off: no cache.",
        ),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False, path_type=Path),
            envvar="UCSJ_CACHE_DIR",
            default=None,
            help="Response cache directory. Env: UCSJ_CACHE_DIR. [default: ./cache]",
        ),
    ]

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        model: str,
        base_url: str | None,
        concurrency: int,
        timeout: float,
        max_retries: int,
        cache_mode: str,
        cache_dir: Path | None,
        **kwargs: Any,
    ) -> Any:
        settings = LLMSettings(
            model=model,
            base_url=base_url,
            concurrency=concurrency,
            timeout=timeout,
            max_retries=max_retries,
            cache_mode=CacheMode(cache_mode),
            cache_dir=cache_dir or default_cache_dir(),
        )
        settings.validate()  # a bad option fails at once, before any input is read
        return func(*args, settings=settings, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="UCSJ_CACHE_DIR",
    default=None,
    help="Response cache directory. Env: UCSJ_CACHE_DIR. [default: ./cache]",
)


def file_option(flag: str, dest: str, help_text: str) -> Callable[..., Any]:
    """An optional output file: `--json F`, `--junit F`, `--html F`."""
    return click.option(flag, dest, type=click.Path(dir_okay=False, path_type=Path), help=help_text)


data_argument = click.argument("data", type=click.Path(dir_okay=False, path_type=Path))
lang_option = click.option(
    "--lang", default=None, help="ISO 639-1 language of records that carry none (e.g. fr)."
)


def output_option(default: str | None = None) -> Callable[..., Any]:
    """-o/--output: a file written atomically; without a default, standard output."""
    where = f"[default: {default}]" if default else "[default: standard output]"
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, path_type=Path),
        default=default,
        help=f"File to write (atomically; - for standard output). {where}",
    )


def _where(output: Path | None) -> str:
    return "standard output" if output is None or str(output) == "-" else str(output)
