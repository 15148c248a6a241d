"""`ucsj judge`: the judges UCS is compared with."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    LazyChoice,
    _where,
    cli,
    data_argument,
    lang_option,
    llm_options,
    output_option,
    shard_option,
)
from ucsj.criteria import load_criteria
from ucsj.data import SampleFile
from ucsj.errors import BackendError, InputError
from ucsj.io import read_json_lines, refuse_overwriting_inputs
from ucsj.llm import LLMSettings
from ucsj.scores import read_scores
from ucsj.shards import Shard
from ucsj.tasks import Task, load_task

if TYPE_CHECKING:  # imported where used: start-up stays light
    from ucsj.methods import JudgeOptions


@cli.command(context_settings=CONTEXT)
@data_argument
@click.option(
    "--method",
    required=True,
    type=LazyChoice("ucsj.methods", "METHODS"),
    help="The judge to run (see ucsj/methods/ for each protocol).",
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
    default=None,
    help="rocketeval, checkeval: pass when the checklist score reaches it. "
    "[default: 0.5, or the one --calibrate-on chooses]",
)
@click.option(
    "--calibrate-on",
    "calibrate_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="rocketeval, checkeval: labelled English data (or that method's predictions on it); "
    "the threshold with the best balanced accuracy on it is used, and rocketeval learns "
    "item weights for the queries it shares with DATA.",
)
@click.option(
    "--checklist",
    "checklist_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="checkeval: the checklist from `ucsj gen-checklist` (edited or not). "
    "[default: the task's seed questions]",
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
@shard_option
@output_option()
@llm_options
def judge(
    data: Path,
    method: str,
    task_spec: str | None,
    lang: str | None,
    guidelines_path: Path | None,
    threshold: float | None,
    calibrate_path: Path | None,
    checklist_path: Path | None,
    scores_path: Path | None,
    criteria_path: Path | None,
    shard: Shard | None,
    output: Path,
    settings: LLMSettings,
) -> None:
    """Run a baseline judge; predictions in the same format as `predict`.

    Example: ucsj judge fr.jsonl --method cot --task rag-faithfulness -o fr.cot.jsonl
    """
    from ucsj.methods import THRESHOLD_METHODS, JudgeOptions, fit_reweighting, judge_file
    from ucsj.methods.calibration import DEFAULT_THRESHOLD, checklist_scores, choose_threshold

    refuse_overwriting_inputs(
        [output],
        [data, guidelines_path, calibrate_path, checklist_path, scores_path, criteria_path],
    )
    criteria = load_criteria(criteria_path) if criteria_path else None
    if task_spec is None and criteria is None:
        raise InputError("--task is needed (or --criteria, whose task is then used)")
    task = load_task(task_spec or criteria.task)  # type: ignore[union-attr]
    options = JudgeOptions(threshold=DEFAULT_THRESHOLD if threshold is None else threshold)
    options.criteria = criteria
    if guidelines_path is not None:
        options.guidelines = _read_text(guidelines_path, "guidelines")
    if checklist_path is not None:
        if method != "checkeval":
            raise InputError("--checklist is for --method checkeval")
        from ucsj.methods.checkeval import load_checklist

        options.checklist = load_checklist(checklist_path, task)
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
        if method not in THRESHOLD_METHODS:
            raise InputError(f"--calibrate-on is for --method {' or '.join(THRESHOLD_METHODS)}")
        if threshold is not None:
            raise InputError("--threshold and --calibrate-on exclude each other")
        SampleFile(data, task, lang).validate()  # bad input fails before any request
        rows = _calibration_rows(calibrate_path, method, task, settings, lang, options)
        options.threshold = choose_threshold(*checklist_scores(rows))
        if method == "rocketeval":
            options.reweighting = fit_reweighting(rows)
        console.info(
            f"calibrated on {calibrate_path}: threshold {options.threshold:.3f}"
            + (
                f", item weights for {len(options.reweighting)} queries"
                if options.reweighting is not None
                else ""
            )
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
            shard=shard,
        )
    console.info(
        f"judged {summary.samples} samples with {method} into {_where(output)}; "
        f"{summary.no_verdict} without a readable verdict"
        + (f", {summary.cut_off} with a reply cut off at its cap" if summary.cut_off else "")
    )
    if summary.failed:
        first_id, reason = summary.failures[0]
        raise BackendError(
            f"{summary.failed} of {summary.samples} samples failed (first: "
            f"'{first_id}': {reason}); rerun to retry them from the cache"
        )


@cli.command("gen-checklist", context_settings=CONTEXT)
@click.option(
    "--task",
    "task_spec",
    required=True,
    help="A preset or a TASK.toml file with a [checkeval] section (aspects, definitions, "
    "seed questions).",
)
@output_option("checklist.json")
@llm_options
def gen_checklist(task_spec: str, output: Path, settings: LLMSettings) -> None:
    """CheckEval's checklist: each aspect's seed questions diversified and elaborated by the
    LLM, then filtered; an editable JSON file for `judge --method checkeval --checklist`.

    Example: ucsj gen-checklist --task rag-faithfulness -o checklist.json
    """
    from ucsj.methods.checkeval import generate_checklist, save_checklist

    content = generate_checklist(load_task(task_spec), settings)
    save_checklist(content, output)
    counts = ", ".join(f"{a['name']} {len(a['questions'])}" for a in content["aspects"])
    unfiltered = [a["name"] for a in content["aspects"] if not a["filtered"]]
    console.info(
        f"wrote the checklist ({counts} questions) to {_where(output)}"
        + (
            f"; the filter kept nothing for {', '.join(unfiltered)}: unfiltered"
            if unfiltered
            else ""
        )
    )


def _calibration_rows(
    path: Path,
    method: str,
    task: Task,
    settings: LLMSettings,
    lang: str | None,
    options: JudgeOptions,
) -> list[dict[str, Any]]:
    """Rows with item scores: read from the method's predictions, or judged from a data file
    with the same checklist as DATA (the threshold is not yet chosen)."""
    from ucsj.methods import JudgeOptions, judge_rows

    for _, first in read_json_lines(path):
        if isinstance(first, dict) and first.get("method") == method:
            return [row for _, row in read_json_lines(path)]
        break
    same_checklist = JudgeOptions(checklist=options.checklist)
    return judge_rows(path, task, method, settings, same_checklist, lang=lang)


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
