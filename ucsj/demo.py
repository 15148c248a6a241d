"""`ucsj demo`: the whole UCS pipeline on the demo set, replayed from recorded responses.

gen -> score (every language) -> fit (English) -> predict (the others) -> report. Offline by
default: the responses of SmolLM2-135M-Instruct recorded in fixtures/demo/ are replayed, so it
needs no model, no key and no network. `live=True` runs the same against a real endpoint.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import ucsj
from ucsj.errors import BackendError, InputError
from ucsj.gen import generate_criteria
from ucsj.io import atomic_writer, dump_json_line
from ucsj.judge_file import save_judge
from ucsj.llm import CacheMode, LLMSettings, ResponseCache
from ucsj.llm.client import DEFAULT_MODEL
from ucsj.report import Report, build_report
from ucsj.scores import read_scores
from ucsj.scoring import failure_message, score_file
from ucsj.tasks import load_task
from ucsj.transfer import fit_judge, predict_records

DEMO_LANGS = ("en", "fr", "de", "es", "hi")
TRAIN_LANG = "en"
DEMO_CONCEPTS = 4  # smaller than the gen defaults so that a CPU records the demo in minutes
DEMO_QUESTIONS = 4
# One call per question with max_tokens 1: on llama-cpp-python, logprobs cost ~0.2 s per
# generated token, so this is several times faster than per-concept there, and every answer
# of a small model has a readable P(yes).
DEMO_SCORING = "per-criterion"
DEMO_TASK = "rag-faithfulness"
RECORDINGS = "responses.jsonl"
UNREACHABLE = "http://127.0.0.1:9/v1"  # replay never connects; this makes sure of it


def demo_dir() -> Path:
    """fixtures/demo beside the package (a source checkout or an editable install)."""
    path = Path(ucsj.__file__).resolve().parent.parent / "fixtures" / "demo"
    if not (path / f"{TRAIN_LANG}.jsonl").is_file():
        raise InputError(
            "the demo set is not here: run ucsj from a source checkout installed "
            "with `pip install -e .`, or pass --fixtures DIR",
            path=str(path),
        )
    return path


def run_demo(
    settings: LLMSettings,
    workdir: Path,
    *,
    fixtures: Path | None = None,
    live: bool = False,
    step: Callable[[str], None] = lambda _: None,
) -> Report:
    """Run the pipeline into `workdir`; return the per-language report of the target languages."""
    fixtures = fixtures or demo_dir()
    workdir.mkdir(parents=True, exist_ok=True)
    if not live:
        recordings = fixtures / RECORDINGS
        if not recordings.is_file():
            raise InputError("no recorded responses for the demo", path=str(recordings))
        settings = replace(
            settings, cache_mode=CacheMode.REPLAY, base_url=UNREACHABLE, cache_dir=workdir / "cache"
        )
        with ResponseCache(settings.cache_dir) as cache:
            cache.import_file(recordings)
    task = load_task(DEMO_TASK)
    step(f"gen: criteria for {task.name} by {settings.model}")
    criteria = generate_criteria(
        task, settings, n_concepts=DEMO_CONCEPTS, n_questions=DEMO_QUESTIONS
    )
    criteria.save(workdir / "criteria.json")
    step(f"     {len(criteria.concepts)} concepts, {len(criteria.questions)} questions")
    for lang in DEMO_LANGS:
        step(f"score: {lang}")
        summary = score_file(
            fixtures / f"{lang}.jsonl",
            criteria,
            task,
            workdir / f"{lang}.scores.jsonl",
            settings,
            scoring=DEMO_SCORING,
        )
        if summary.failed:
            raise BackendError(failure_message(summary, settings.cache_mode))
    step(f"fit: transfer module on {TRAIN_LANG} labels")
    judge = fit_judge(read_scores(workdir / f"{TRAIN_LANG}.scores.jsonl"), criteria)
    save_judge(judge, workdir / "judge.skops")
    step(f"     chose {judge['meta']['module']}")
    predictions = []
    for lang in DEMO_LANGS:
        if lang == TRAIN_LANG:
            continue
        rows = predict_records(judge, read_scores(workdir / f"{lang}.scores.jsonl"))
        path = workdir / f"{lang}.preds.jsonl"
        with atomic_writer(path) as out:
            out.writelines(dump_json_line(row) for row in rows)
        predictions.append(path)
    step("predict: " + ", ".join(lang for lang in DEMO_LANGS if lang != TRAIN_LANG))
    return build_report(predictions)


def demo_commands(
    settings: LLMSettings, workdir: Path, *, fixtures: Path | None = None, live: bool = False
) -> list[str]:
    """The `ucsj` commands that redo what run_demo did into `workdir`, step by step."""
    fixtures = fixtures or demo_dir()
    cache_dir = workdir / "cache" if not live else settings.cache_dir

    def line(*words: object) -> str:
        return " ".join(shlex.quote(str(w)) for w in words)

    llm = ["--cache-dir", cache_dir]
    if settings.model != DEFAULT_MODEL:
        llm += ["--model", settings.model]
    if live:
        llm += ["--base-url", settings.base_url] if settings.base_url else []
    else:
        llm += ["--cache", "replay"]
    criteria = workdir / "criteria.json"
    commands = [] if live else [line("ucsj", "cache", "import", fixtures / RECORDINGS, *llm[:2])]
    commands.append(
        line(
            "ucsj", "gen", "--task", DEMO_TASK, "--concepts", DEMO_CONCEPTS,
            "--questions", DEMO_QUESTIONS, "-o", criteria, *llm,
        )
    )  # fmt: skip
    for lang in DEMO_LANGS:
        commands.append(
            line(
                "ucsj", "score", fixtures / f"{lang}.jsonl", "--criteria", criteria,
                "--scoring", DEMO_SCORING, "-o", workdir / f"{lang}.scores.jsonl", *llm,
            )
        )  # fmt: skip
    judge = workdir / "judge.skops"
    train = workdir / f"{TRAIN_LANG}.scores.jsonl"
    commands.append(line("ucsj", "fit", "--train", train, "--criteria", criteria, "-o", judge))
    targets = [lang for lang in DEMO_LANGS if lang != TRAIN_LANG]
    for lang in targets:
        scores, preds = workdir / f"{lang}.scores.jsonl", workdir / f"{lang}.preds.jsonl"
        commands.append(line("ucsj", "predict", scores, "--judge", judge, "-o", preds))
    predictions = [workdir / f"{lang}.preds.jsonl" for lang in targets]
    commands.append(line("ucsj", "report", *predictions, "--html", workdir / "report.html"))
    return commands


def run_demo_in(settings: LLMSettings, workdir: Path | None, **options: object) -> Report:
    """run_demo in `workdir`, or in a temporary directory removed afterwards."""
    if workdir is not None:
        return run_demo(settings, workdir, **options)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="ucsj-demo-") as tmp:
        return run_demo(settings, Path(tmp), **options)  # type: ignore[arg-type]
