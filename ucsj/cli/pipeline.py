"""gen, score, fit, predict and report: the UCS pipeline."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    LazyChoice,
    _where,
    cli,
    command_line,
    data_argument,
    file_option,
    lang_option,
    llm_options,
    output_option,
    shard_option,
)
from ucsj.criteria import CriteriaSet, criteria_from_json, load_criteria
from ucsj.errors import BackendError, GateFailed, InputError
from ucsj.gen import GEN_MODES, generate_criteria
from ucsj.io import (
    dump_json_line,
    input_path,
    open_output,
    read_json_lines,
    refuse_overwriting_inputs,
)
from ucsj.judge_file import load_judge, save_judge
from ucsj.llm import LLMSettings
from ucsj.scores import TARGETS, ScoreRecord, is_scores_file, read_scores
from ucsj.scoring import (
    SCORINGS,
    ScoreSummary,
    failure_message,
    score_file,
    unreadable_problem,
)
from ucsj.shards import Shard
from ucsj.tasks import PRESETS, Task, load_task
from ucsj.transfer_options import FEATURE_KINDS, MODULE_NAMES

if TYPE_CHECKING:
    from ucsj.report import Report
    from ucsj.shift import ShiftReport


@cli.command(context_settings=CONTEXT)
@click.option(
    "--task",
    "task_spec",
    required=True,
    help=f"A preset ({', '.join(PRESETS)}) or a TASK.toml file.",
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
    refuse_overwriting_inputs([output], [Path(task_spec)])
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
@shard_option
@output_option()
@llm_options
def score(
    data: Path,
    criteria_path: Path,
    task_spec: str | None,
    lang: str | None,
    scoring: str,
    shard: Shard | None,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Stage 2: answer every criterion question for every sample of DATA.

    Example: ucsj score data.jsonl --criteria criteria.json --lang fr -o scores.jsonl
    """
    refuse_overwriting_inputs([output], [data, criteria_path])
    criteria = load_criteria(criteria_path)
    task = load_task(task_spec or criteria.task)
    summary = _score_with_progress(data, criteria, task, output, settings, lang, scoring, shard)
    langs = ", ".join(f"{k}: {v}" for k, v in summary.langs.items())
    console.info(
        f"scored {summary.samples} samples ({langs}) into {_where(output)}; "
        f"{summary.unreadable} of {summary.values} answers unreadable"
    )
    if summary.failed:
        raise BackendError(failure_message(summary, settings.cache_mode))
    _check_unreadable(summary, scoring)


def _check_unreadable(summary: ScoreSummary, scoring: str) -> None:
    problem = unreadable_problem(summary, scoring)
    if problem is None:
        return
    fatal, message = problem
    if fatal:
        raise BackendError(message)
    logging.getLogger("ucsj").warning(message)


def _score_with_progress(
    data: Path,
    criteria: CriteriaSet,
    task: Task,
    output: Path,
    settings: LLMSettings,
    lang: str | None,
    scoring: str,
    shard: Shard | None = None,
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
            shard=shard,
        )


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
            criteria = _criteria_of_scores(records, criteria_path, path)
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
            raise BackendError(failure_message(summary, settings.cache_mode))
        _check_unreadable(summary, scoring)
        return read_scores(scored), criteria


def _criteria_of_scores(
    records: list[ScoreRecord], criteria_path: Path | None, scores_path: Path
) -> CriteriaSet:
    """The criteria a scores file was made with: --criteria, else ./criteria.json, checked
    against the fingerprint the scores carry."""
    explicit = criteria_path is not None
    criteria_path = criteria_path or Path("criteria.json")
    if not criteria_path.exists():
        raise InputError(
            "--criteria is needed: give the criteria file these scores were made with "
            "(no criteria.json here)",
            path=str(scores_path),
        )
    criteria = load_criteria(criteria_path)
    made_with = records[0].criteria if records else criteria.fingerprint
    if made_with != criteria.fingerprint:
        default = "" if explicit else " (read by default; give the right one with --criteria)"
        raise InputError(
            f"these scores were made with criteria {made_with[:19]}…, but {criteria_path}"
            f"{default} has fingerprint {criteria.fingerprint[:19]}…: give the criteria file "
            "they were scored with",
            path=str(scores_path),
        )
    return criteria


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
    help="The criteria file of the scores (checked against their fingerprint), or to score "
    "a data file with. [default: criteria.json]",
)
@click.option(
    "--module",
    type=click.Choice(["auto", *MODULE_NAMES]),
    default="auto",
    show_default=True,
    help="Transfer module. auto: 5-fold cross-validation repeated 3 times (seeded, stratified) "
    "on the English data by balanced accuracy, Kendall's tau or pairwise accuracy; prints each "
    "module's mean +- sd and takes the simplest (logreg, svm, knn, rf, gb, mlp) within one "
    "standard error of the best. mlp is the paper's choice (A.3).",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Train the module with N seeds (random_state 42, 43, ...); predict averages their "
    "probabilities and reports the spread (the paper averages 3 runs).",
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
    seeds: int,
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
    --module auto compares the six modules by repeated stratified cross-validation on the
    training data (usually English) and takes the simplest within one standard error of the best.

    Example: ucsj fit --train en.scores.jsonl --criteria criteria.json -o judge.skops
    """
    from ucsj.report import fmt
    from ucsj.transfer import CV_REPEATS, fit_judge

    refuse_overwriting_inputs([output], [train_path, criteria_path])
    records, criteria = _scores_or_score(
        train_path, criteria_path, None, lang, scoring, settings, task_spec
    )
    judge = fit_judge(
        records,
        criteria,
        module=module,
        features=features,
        target=target,
        seeds=seeds,
        source=str(train_path),
    )
    meta = judge["meta"]
    if meta["validation"]:
        table = Table(
            "module",
            f"{meta['validation_metric']} mean",
            "sd",
            title=f"Cross-validation on {', '.join(meta['train_langs'])} "
            f"({meta['validation_folds'] // CV_REPEATS} folds x "
            f"{CV_REPEATS} repeats, seeded)",
        )
        for name, value in meta["validation"].items():
            mark = " <- chosen" if name == meta["module"] else ""
            table.add_row(name, f"{fmt(value)}{mark}", fmt(meta["validation_sd"][name]))
        console.out.print(table)
        console.info(meta["selection"])
    save_judge(judge, output)
    seeded = f", {seeds} seeds" if seeds > 1 else ""
    console.info(
        f"trained {meta['module']} ({meta['target']}{seeded}) on {meta['train_size']} samples "
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
@click.option(
    "--align",
    type=LazyChoice("ucsj.shift", "ALIGNMENTS"),
    default="none",
    show_default=True,
    help="Label-free alignment per language: standardize moves each feature to English's mean "
    "and spread; prior shifts the verdicts to English's predicted pass rate. Both help when "
    "the model answers more leniently in a language and harm when the language's outputs "
    "are genuinely better or worse (see README). The method gets a +standardize or +prior "
    "suffix.",
)
@lang_option
@output_option()
@llm_options
def predict(
    data: Path,
    judge_path: Path,
    task_spec: str | None,
    align: str,
    lang: str | None,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Apply a judge to scores, or to a data file (scored first with the judge's criteria).

    Warns on stderr, one line per language, when a language's criterion answers moved from the
    English ones beyond the shift threshold (ucsj analyze shift tells more).

    Example: ucsj predict fr.scores.jsonl --judge judge.skops -o fr.preds.jsonl
    """
    from ucsj.transfer import predict_records

    refuse_overwriting_inputs([output], [data, judge_path])
    judge = load_judge(judge_path)
    meta = judge["meta"]
    criteria = criteria_from_json(meta["criteria"], str(judge_path))
    if not is_scores_file(data):
        settings.model = meta["scoring_model"]
    records, _ = _scores_or_score(data, None, criteria, lang, meta["scoring"], settings, task_spec)
    rows = predict_records(judge, records, source=str(data), align=align)
    with open_output(output) as out:
        for row in rows:
            out.write(dump_json_line(row))
    console.info(f"wrote {len(rows)} predictions to {_where(output)}")
    if align == "prior":
        from ucsj.shift import prior_misses

        for line in prior_misses(rows, judge["reference"]["predicted_pass_rate"]):
            console.err.print(line, markup=False)
    _warn_on_shift(judge, criteria, records)


def _warn_on_shift(judge: dict, criteria: CriteriaSet, records: list[ScoreRecord]) -> None:
    from ucsj.shift import language_shifts, reference_of, warning_lines

    if "reference" not in judge:
        console.info(
            "the judge file has no English answer reference (fitted by an older ucsj): "
            "shift not checked; refit with `ucsj fit` to get the check"
        )
        return
    reference = reference_of(judge, "the shift check")
    for line in warning_lines(language_shifts(reference, criteria, records)):
        console.err.print(line, markup=False)


@cli.command(context_settings=CONTEXT)
@click.argument(
    "predictions", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--gate",
    "gates",
    multiple=True,
    help='Quality gate, repeatable: "ba>=0.75" (every language), "ba[fr]>=0.8", '
    '"ba[avg]>=0.8" (mean over languages), "ba[all]>=0.8" (pooled), '
    '"pass_rate[hi]>=0.9", "error_rate<=0.05", "tau[de-en]>=0.3", "acc[fr/chat]>=0.7", '
    '"position_bias<=0.6", "shift<=0.15" (with --judge). Exit 1 when one fails.',
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
    type=click.Path(dir_okay=False, path_type=Path),
    help="A PNG (e.g. from `ucsj analyze`) to inline in the --html page; repeatable.",
)
@click.option(
    "--judge",
    "judge_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="judge.skops from fit: with --scores, adds each language's answer shift from the "
    'English reference to the report and allows --gate "shift<=0.15".',
)
@click.option(
    "--scores",
    "scores_paths",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The scores the predictions were made from (needs no labels); repeatable; with --judge.",
)
def report(
    predictions: tuple[Path, ...],
    gates: tuple[str, ...],
    max_error_rate: float | None,
    json_path: Path | None,
    junit_path: Path | None,
    html_path: Path | None,
    figures: tuple[Path, ...],
    judge_path: Path | None,
    scores_paths: tuple[Path, ...],
) -> None:
    """Quality per language and method, with gates for CI: balanced accuracy for binary
    tasks, Kendall's tau per language pair for pointwise ones, accuracy over both orders with
    position bias per language and subset for pairwise ones. avg is the unweighted mean over
    languages (the papers' "average BA"; best is marked on it too), all pools every sample.
    An undefined metric shows as n/a with its reason, and a gate on it fails.

    Example: ucsj report fr.preds.jsonl de.preds.jsonl --gate "ba>=0.75" --junit junit.xml
    """
    from ucsj.report import build_report, parse_gate, write_json_report, write_junit

    if figures and html_path is None:
        raise click.UsageError("--figure puts a PNG into the --html page: give --html FILE too")
    # a missing figure: "ucsj: error: F: file not found", as other inputs; a pipe: read once
    figures = tuple(input_path(figure) for figure in figures)
    refuse_overwriting_inputs([json_path, junit_path, html_path], [*predictions, *figures])
    if figures:
        from ucsj.report_html import check_figures

        check_figures(list(figures))
    parsed = [parse_gate(g) for g in gates]
    if max_error_rate is not None:
        parsed.append(parse_gate(f"error_rate<={max_error_rate}"))
    shift = _shift_of(judge_path, scores_paths)
    result = build_report(
        list(predictions), parsed, shift, judge_path.name if judge_path else "judge"
    )
    print_report(result)
    if shift is not None:
        from ucsj.cli.analyses import print_shift

        print_shift(shift)
    if json_path:
        write_json_report(result, json_path)
    if junit_path:
        write_junit(result, junit_path)
    if html_path:
        from ucsj.report_html import collect_provenance, write_html

        others = [*([judge_path] if judge_path else []), *scores_paths]
        context = click.get_current_context()
        provenance = collect_provenance(list(predictions), command_line(context), others=others)
        write_html(result, html_path, provenance, list(figures))
    for gate in result.gates:
        if not gate.passed:
            console.err.print(gate.line(), markup=False)
    if result.failed_gates:
        raise GateFailed(f"{len(result.failed_gates)} of {len(result.gates)} gate checks failed")


def _shift_of(judge_path: Path | None, scores_paths: tuple[Path, ...]) -> ShiftReport | None:
    if judge_path is None and not scores_paths:
        return None
    if judge_path is None or not scores_paths:
        raise InputError(
            "report: --judge and --scores go together (the shift compares the "
            "scores' answers with the judge's English reference)"
        )
    from ucsj.shift import shift_report

    records = [r for path in scores_paths for r in read_scores(path)]
    return shift_report(load_judge(judge_path), records, ", ".join(map(str, scores_paths)))


def print_report(result: Report) -> None:
    from ucsj.report import (
        ALL,
        AVG,
        DETAIL_COLUMNS,
        EXTRA_COLUMNS,
        HEADLINE_TITLE,
        fmt,
        headline,
        no_verdict_at_all,
        undefined_notes,
    )

    title = HEADLINE_TITLE[result.kind]
    if len(result.methods) > 1:
        table = Table(
            "method",
            *result.columns,
            title=f"{title} (* best per column)",
            caption="avg: unweighted mean over languages; all: every sample pooled",
        )
        for method in result.methods:
            cells = []
            for group in result.columns:
                m = result.table[method].get(group)
                star = "*" if m is not None and method in result.best(group) else ""
                if m is None:
                    cells.append("–")
                elif no_verdict_at_all(m):  # all counted as wrong: a 0.000 would read as a score
                    cells.append("no verdict")
                else:
                    cells.append(f"{fmt(m.value(result.headline))}{star}")
            table.add_row(method, *cells)
        console.out.print(table)
    details = DETAIL_COLUMNS[result.kind]
    for method in result.methods:
        extras = result.extras.get(method, {})  # baselines' own columns
        columns = list(next(iter(extras.values()), {}))
        table = Table(
            "lang" if result.kind == "binary" else "group",
            "n",
            f"{result.headline} [95% CI]",
            *(name for _, name in details),
            *(EXTRA_COLUMNS[c][0] for c in columns),
            title=method,
        )
        for group in [*result.langs, *result.breakdowns, AVG, ALL]:
            m = result.table[method].get(group)
            if m is None:
                continue
            if no_verdict_at_all(m):  # as the HTML says: no quality to show, only the share
                table.add_row(
                    group,
                    str(m.n),
                    "no verdict for any sample",
                    *(
                        fmt(m.value(metric)) if metric == "error_rate" else "–"
                        for metric, _ in details
                    ),
                    *("–" for _ in columns),
                )
                continue
            table.add_row(
                group,
                str(m.n),
                headline(result, m),
                *(fmt(m.value(metric)) for metric, _ in details),
                *(fmt(extras.get(group, {}).get(c, float("nan"))) for c in columns),
            )
        console.out.print(table)
    for note in undefined_notes(result):
        console.out.print(note, markup=False)
