"""The command group, its shared options and small helpers."""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from ucsj import __version__, console
from ucsj.llm import CacheMode, LLMSettings
from ucsj.llm.cache import default_cache_dir
from ucsj.llm.client import DEFAULT_MODEL

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
VERSIONS_OF = ("httpx", "scikit-learn", "llama-cpp-python")


def _versions() -> str:
    """ucsj's version and those of what its answers depend on, read without importing them."""
    import platform
    from importlib import metadata

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    parts = [f"Python {platform.python_version()}"]
    parts += [f"{package} {version(package)}" for package in VERSIONS_OF]
    return f"ucsj {__version__}\n" + ", ".join(parts)


def _print_version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_versions())
        ctx.exit()


def _verbosity(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """-q/-v given after the subcommand add to those given before it."""
    if value and not ctx.resilient_parsing:
        flags = ctx.find_root().meta.setdefault("ucsj.verbosity", {})
        flags[param.name] = True
        console.configure(**flags)
        _log_env_file(ctx)


def _log_env_file(ctx: click.Context) -> None:
    """Name (never show) what .env supplied, once -v is known: it may follow the subcommand."""
    meta = ctx.find_root().meta
    if meta.get("ucsj.dotenv") and meta.get("ucsj.verbosity", {}).get("verbose"):
        logging.getLogger("ucsj").debug("read %s from .env", ", ".join(meta.pop("ucsj.dotenv")))


def verbosity_options() -> list[click.Option]:
    return [
        click.Option(
            ["-q", "--quiet"],
            is_flag=True,
            expose_value=False,
            callback=_verbosity,
            help="Print only errors and results.",
        ),
        click.Option(
            ["-v", "--verbose"],
            is_flag=True,
            expose_value=False,
            callback=_verbosity,
            help="Log retries and other details.",
        ),
    ]


class Group(click.Group):
    """Every command of the group (and of its subgroups) also takes -q and -v, so that
    `ucsj score -q ...` works as users type it."""

    group_class = type  # subgroups (analyze, cache, convert) are Groups too

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not isinstance(cmd, click.Group):
            cmd.params.extend(verbosity_options())
        super().add_command(cmd, name)


@click.group(cls=Group, context_settings=CONTEXT)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version of ucsj, Python, httpx, scikit-learn and llama-cpp-python, and exit.",
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """ucsj: a multilingual LLM judge that learns from English labels.

    Exit codes: 0 ok, 1 a quality gate failed, 2 usage or input error, 3 backend or runtime
    error, 4 requests pending (--cache collect), 130 interrupted (Ctrl-C; a rerun resumes from
    the cache). OPENAI_API_KEY, OPENAI_BASE_URL, UCSJ_MODEL and UCSJ_CACHE_DIR are read from
    the environment, else from a .env file in the working folder; the key is never written
    anywhere.

    Shell completion (bash): eval "$(_UCSJ_COMPLETE=bash_source ucsj)"
    """
    console.configure(**ctx.meta.get("ucsj.verbosity", {}))
    console.tables_on_stdout()  # until an output option claims standard output
    from ucsj.envfile import load_env_file

    ctx.meta["ucsj.dotenv"] = load_env_file()
    _log_env_file(ctx)


cli.params[:0] = verbosity_options()  # before the subcommand, as `ucsj -q score ...`


class LazyChoice(click.Choice):
    """A choice among the names of `module.attribute`, imported only when they are needed
    (parsing, the command's own help, completion), so that `ucsj` starts without it."""

    def __init__(self, module: str, attribute: str) -> None:
        self._source = (module, attribute)
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        module, attribute = self._source
        return tuple(getattr(importlib.import_module(module), attribute))

    @choices.setter
    def choices(self, _: Sequence[str]) -> None:
        pass  # click.Choice.__init__ assigns; the names come from the module


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
            "cache only, a miss is an error; off: no cache; collect: send nothing, write the "
            "missing requests to --pending and exit 4 (see README, Large runs).",
        ),
        click.option(
            "--pending",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="With --cache collect: the OpenAI Batch API input file (JSONL) the missing "
            "requests are written to, each once.",
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
        pending: Path | None,
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
            pending=pending,
        )
        settings.validate()  # a bad option fails at once, before any input is read
        if pending is not None:  # the pending file is written whole
            from ucsj.io import refuse_overwriting_inputs

            files = [value for value in kwargs.values() if isinstance(value, Path)]
            refuse_overwriting_inputs([pending], files)
        return func(*args, settings=settings, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def _shard(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from ucsj.shards import parse_shard

    return None if value is None else parse_shard(value)


shard_option = click.option(
    "--shard",
    default=None,
    callback=_shard,
    metavar="K/N",
    help="Take only the samples whose id hashes to shard K of N (K from 0), so N machines "
    "split one file without coordination; merge their caches with cache export/import.",
)

cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="UCSJ_CACHE_DIR",
    default=None,
    help="Response cache directory. Env: UCSJ_CACHE_DIR. [default: ./cache]",
)


def claims_stdout(_: click.Context, param: click.Parameter, value: Any) -> Any:
    """The callback of every output option: an output on standard output (`-`, or no -o
    where that means stdout) sends the command's tables and summaries to stderr."""
    if (value is None and isinstance(param, click.Option) and param.opts[0] == "-o") or (
        value is not None and str(value) == "-"
    ):
        console.data_on_stdout()
    return value


def file_option(flag: str, dest: str, help_text: str) -> Callable[..., Any]:
    """An optional output file: `--json F`, `--junit F`, `--html F`."""
    return click.option(
        flag,
        dest,
        type=click.Path(dir_okay=False, path_type=Path),
        callback=claims_stdout,
        help=f"{help_text} (- for standard output)",
    )


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
        callback=claims_stdout,
        help=f"File to write (atomically; - for standard output). {where}",
    )


def command_line(ctx: click.Context) -> str:
    """The command as it could be typed again: its arguments, then the options not left at
    their defaults (for a report's provenance)."""
    import shlex

    words = ctx.command_path.split()
    options: list[str] = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name) if param.name else None
        values = list(value) if isinstance(value, tuple | list) else [value]
        if isinstance(param, click.Argument):
            words += [str(v) for v in values if v is not None]
        elif param.expose_value and value not in (None, False, ()) and value != param.default:
            flag = max(param.opts, key=len)
            if getattr(param, "is_flag", False):
                options.append(flag)
            else:
                for v in values:
                    options += [flag, str(v)]
    return shlex.join(words + options)


def _where(output: Path | None) -> str:
    return "standard output" if output is None or str(output) == "-" else str(output)
