"""Command-line conventions: -q/-v after the subcommand, .env, -V, completion, help texts."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import click
import pytest
from conftest import ucsj
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_dataset

from ucsj import __version__
from ucsj.cli.base import cli
from ucsj.envfile import load_env_file, parse_env
from ucsj.errors import InputError


def run(args: list[str], cwd, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ucsj", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def clean_env(**extra: str) -> dict[str, str]:
    names = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "UCSJ_MODEL", "UCSJ_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in names}
    return {**env, **extra}


def leaf_commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*path, name))
        else:
            yield (*path, name), command


# -- -q and -v after the subcommand -------------------------------------------------------------


def test_quiet_after_the_subcommand_silences_messages(tmp_path, capsys):
    from conftest import ROOT

    recordings = str(ROOT / "fixtures" / "demo" / "responses.jsonl")
    assert ucsj("cache", "import", recordings, "--cache-dir", str(tmp_path / "a")) == 0
    assert "imported" in capsys.readouterr().err
    assert ucsj("cache", "import", recordings, "--cache-dir", str(tmp_path / "b"), "-q") == 0
    assert capsys.readouterr().err == ""


def test_verbose_after_the_subcommand_turns_on_debug_logging(tmp_path):
    assert ucsj("cache", "stats", "--cache-dir", str(tmp_path), "-v") == 0
    assert logging.getLogger("ucsj").level == logging.DEBUG
    assert ucsj("cache", "stats", "--cache-dir", str(tmp_path)) == 0
    assert logging.getLogger("ucsj").level == logging.WARNING, "each call starts afresh"
    assert ucsj("-q", "cache", "stats", "--cache-dir", str(tmp_path)) == 0
    assert logging.getLogger("ucsj").level == logging.ERROR


@pytest.mark.parametrize("path", [p for p, _ in leaf_commands()], ids=" ".join)
def test_every_command_takes_quiet_and_verbose(path):
    command = dict(leaf_commands())[path]
    names = {opt for p in command.params for opt in getattr(p, "opts", [])}
    assert {"-q", "--quiet", "-v", "--verbose"} <= names


# -- .env ----------------------------------------------------------------------------------------


def test_dotenv_supplies_key_url_and_cache_the_environment_wins_and_the_key_stays_out(tmp_path):
    secret = "sk-dotenv-UNIQUE-3c9d1e"
    labels = write_dataset(tmp_path / "en.jsonl", "en", 4)
    with FakeLLMServer(ScriptedJudge(labels)) as server:
        (tmp_path / ".env").write_text(
            "# settings for this folder\n"
            f"export OPENAI_API_KEY='{secret}'\n"
            f'OPENAI_BASE_URL="{server.base_url}"\n'
            "UCSJ_CACHE_DIR=dotenv-cache  # a comment\n"
            "UCSJ_MODEL=model-from-dotenv-2024-01-01\n"
            "OTHER_SETTING=ignored\n"
        )
        env = clean_env(UCSJ_MODEL="model-from-env-2024-01-01")
        logs = []
        for args in (
            ["gen", "--task", "rag-faithfulness", "-o", "c.json", "-v"],
            ["score", "en.jsonl", "--criteria", "c.json", "-o", "s.jsonl", "-v"],
        ):
            proc = run(args, tmp_path, env)
            assert proc.returncode == 0, proc.stderr
            logs.append(proc.stdout + proc.stderr)
        assert server.state.headers[0]["Authorization"] == f"Bearer {secret}"
    criteria = json.loads((tmp_path / "c.json").read_text())
    assert criteria["generated_by"]["model"] == "model-from-env-2024-01-01", "environment wins"
    assert (tmp_path / "dotenv-cache").is_dir() and not (tmp_path / "cache").exists()
    assert "read OPENAI_API_KEY, OPENAI_BASE_URL, UCSJ_CACHE_DIR from .env" in logs[0]
    for log in logs:
        assert secret not in log
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert secret.encode() not in path.read_bytes(), path


def test_parse_env_quotes_comments_and_bad_lines():
    assert parse_env("A=1\n\n# c\nexport B = 'x y'\nC=\"q\"\nD=v # note\nE=\n") == {
        "A": "1",
        "B": "x y",
        "C": "q",
        "D": "v",
        "E": "",
    }
    with pytest.raises(InputError) as error:
        parse_env("A=1\nOPENAI_API_KEY sk-secret-value\n", "/w/.env")
    assert str(error.value) == "/w/.env:2: expected NAME=value"


def test_load_env_file_takes_only_ucsj_variables_not_already_set(tmp_path):
    (tmp_path / ".env").write_text("UCSJ_MODEL=a\nOPENAI_BASE_URL=b\nPATH=/evil\n")
    environ = {"OPENAI_BASE_URL": "set"}
    assert load_env_file(tmp_path, environ) == ["UCSJ_MODEL"]
    assert environ == {"OPENAI_BASE_URL": "set", "UCSJ_MODEL": "a"}
    assert load_env_file(tmp_path / "none", environ) == []


def test_a_bad_dotenv_is_an_input_error(tmp_path):
    (tmp_path / ".env").write_text("not a setting\n")
    proc = run(["cache", "stats", "--cache-dir", "c"], tmp_path, clean_env())
    assert proc.returncode == 2
    assert ".env:1: expected NAME=value" in proc.stderr


# -- version and completion ----------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_names_python_and_the_libraries(flag, capsys):
    from importlib import metadata

    assert ucsj(flag) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == f"ucsj {__version__}"
    assert second.startswith(f"Python {sys.version.split()[0]}, ")
    assert f"httpx {metadata.version('httpx')}" in second
    assert f"scikit-learn {metadata.version('scikit-learn')}" in second
    assert "llama-cpp-python " in second


def test_bash_completion_completes_commands_and_choices(tmp_path):
    def complete(words: str) -> list[str]:
        cword = len(words.split()) - (0 if words.endswith(" ") else 1)
        env = clean_env(_UCSJ_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(cword))
        proc = run([], tmp_path, env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert "plain,score" in complete("ucsj sco")
    assert {"plain,per-concept", "plain,joint", "plain,per-criterion"} <= set(
        complete("ucsj score --scoring ")
    )
    assert "plain,cot" in complete("ucsj judge --method c")


# -- help texts ----------------------------------------------------------------------------------


def test_gen_help_lists_every_preset(capsys):
    from ucsj.tasks import PRESETS

    assert ucsj("gen", "--help") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert len(PRESETS) == 4
    for preset in PRESETS:
        assert preset in text.replace("- ", "-")


@pytest.mark.parametrize("path", [p for p, _ in leaf_commands()], ids=" ".join)
def test_every_option_has_help(path):
    command = dict(leaf_commands())[path]
    assert [p.name for p in command.params if isinstance(p, click.Option) and not p.help] == []


@pytest.mark.parametrize("name", sorted(cli.commands["analyze"].commands))
def test_every_analyze_command_has_an_example(name):
    text = cli.commands["analyze"].commands[name].help
    assert f"Example: ucsj analyze {name} " in text


def test_figure_without_html_is_a_usage_error(tmp_path, capsys):
    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG")
    assert ucsj("report", str(tmp_path / "p.jsonl"), "--figure", str(png)) == 2
    assert "--figure puts a PNG into the --html page" in capsys.readouterr().err


def test_help_lists_every_exit_code_the_readme_documents(capsys):
    assert ucsj("--help") == 0
    text = " ".join(capsys.readouterr().out.split())
    for code in ("0 ok", "1 a quality gate failed", "2 usage or input error"):
        assert code in text
    assert "3 backend or runtime error" in text
    assert "4 requests pending (--cache collect)" in text and "130 interrupted" in text
