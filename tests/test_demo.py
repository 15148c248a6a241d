"""`ucsj demo`: the whole pipeline from the recorded responses of the built-in model, offline."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_replays_offline_and_prints_the_report(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "OPENAI_BASE_URL": "http://10.255.255.1/v1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "ucsj", "demo", "--workdir", str(tmp_path / "w")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Replaying recorded responses of SmolLM2-135M-Instruct" in proc.stderr
    assert "ucsj demo --live" in proc.stderr
    for lang in ("fr", "de", "es", "hi", "all"):
        assert f"│ {lang} " in proc.stdout, proc.stdout
    preds = [json.loads(x) for x in (tmp_path / "w" / "hi.preds.jsonl").read_text().splitlines()]
    assert len(preds) == 24 and {p["lang"] for p in preds} == {"hi"}
    assert all(p["pred"] in (0, 1) for p in preds)
    criteria = json.loads((tmp_path / "w" / "criteria.json").read_text())
    assert criteria["generated_by"]["model"] == "smollm2-135m-instruct-q4_1"
    assert not (tmp_path / "cache").exists(), "the demo leaves the default ./cache alone"
    replay_printed_commands(proc.stdout, tmp_path / "w", tmp_path / "by-hand")


def replay_printed_commands(stdout: str, workdir, again) -> None:
    """The commands `demo --workdir` prints, run into another folder, make the same files."""
    import shlex

    from conftest import ucsj

    commands = [line for line in stdout.splitlines() if line.startswith("ucsj ")]
    assert [c.split()[1] for c in commands] == [
        "cache", "gen", *["score"] * 5, "fit", *["predict"] * 4, "report",
    ]  # fmt: skip
    assert "--concepts 4 --questions 4" in commands[1]
    assert "--scoring per-criterion" in commands[2]
    for command in commands:
        argv = shlex.split(command.replace(str(workdir), str(again)))
        assert ucsj(*argv[1:]) == 0, command
    names = ["criteria.json", "judge.skops"]
    names += [f"{lang}.scores.jsonl" for lang in ("en", "fr", "de", "es", "hi")]
    names += [f"{lang}.preds.jsonl" for lang in ("fr", "de", "es", "hi")]
    for name in names:
        assert (again / name).read_bytes() == (workdir / name).read_bytes(), name
    assert "Balanced accuracy" in (again / "report.html").read_text()  # dated: not compared


# -- every baseline judge replays the built-in model's real recordings -------------------------

import importlib.util  # noqa: E402

import pytest  # noqa: E402
from conftest import ROOT, ucsj  # noqa: E402

from ucsj.llm import CacheMode, LLMSettings  # noqa: E402
from ucsj.methods import METHODS  # noqa: E402

DEMO = ROOT / "fixtures" / "demo"


def _record_module():
    spec = importlib.util.spec_from_file_location("record_baselines", DEMO / "record_baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo_subset(tmp_path_factory):
    from ucsj.demo import run_demo

    workdir = tmp_path_factory.mktemp("baselines")
    run_demo(LLMSettings(cache_mode=CacheMode.REPLAY), workdir)
    files = _record_module().subset(workdir)
    assert (
        ucsj(
            "cache",
            "import",
            str(DEMO / "baselines.jsonl"),
            "--cache-dir",
            str(workdir / "bl-cache"),
        )
        == 0
    )
    return workdir, files


@pytest.mark.parametrize("method", list(METHODS))
def test_every_baseline_replays_the_recorded_model(demo_subset, method):
    workdir, files = demo_subset
    offline = [
        "--cache",
        "replay",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--cache-dir",
        str(workdir / "bl-cache"),
        "--task",
        "rag-faithfulness",
    ]
    outputs = []
    for lang, (data, scores) in files.items():
        extra = (
            ["--scores", str(scores), "--criteria", str(workdir / "criteria.json")]
            if method == "llm-aggregator"
            else []
        )
        out = workdir / f"{lang}.{method}.replay.jsonl"
        assert ucsj("judge", str(data), "--method", method, "-o", str(out), *extra, *offline) == 0
        outputs.append(out)
    rows = [json.loads(x) for out in outputs for x in out.read_text().splitlines()]
    assert len(rows) == _record_module().SUBSET * len(files)
    assert all(r["method"] == method for r in rows)
    assert all(r["pred"] in (0, 1, None) and "error" not in r for r in rows)
    assert ucsj("report", *map(str, outputs)) == 0


def test_live_demo_commands_call_the_endpoint_and_replay_nothing(tmp_path):
    from pathlib import Path

    from ucsj.demo import demo_commands

    settings = LLMSettings(
        model="m-2024-01-01", base_url="http://127.0.0.1:8080/v1", cache_dir=Path("cache")
    )
    commands = demo_commands(settings, Path("run"), live=True)
    assert commands[0].startswith("ucsj gen --task rag-faithfulness --concepts 4 --questions 4")
    assert all("cache import" not in c and "--cache replay" not in c for c in commands)
    assert all(
        c.endswith("--cache-dir cache --model m-2024-01-01 --base-url http://127.0.0.1:8080/v1")
        for c in commands[:6]
    )
    assert commands[-1] == (
        "ucsj report run/fr.preds.jsonl run/de.preds.jsonl run/es.preds.jsonl run/hi.preds.jsonl"
        " --html run/report.html"  # as the README's demo block shows
    )
