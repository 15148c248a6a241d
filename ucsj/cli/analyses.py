"""`ucsj analyze`: the UCS paper's section 5 on the user's scores."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    cache_dir_option,
    claims_stdout,
    cli,
    file_option,
)
from ucsj.criteria import load_criteria
from ucsj.errors import InputError
from ucsj.io import read_json_lines, refuse_overwriting_inputs, write_json
from ucsj.llm import ResponseCache
from ucsj.llm.cache import default_cache_dir
from ucsj.scores import ScoreRecord, read_scores
from ucsj.transfer_options import FEATURE_KINDS, MODULE_NAMES

if TYPE_CHECKING:
    from ucsj.shift import ShiftReport


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


def _module_option(help_text: str) -> Callable[..., Any]:
    return click.option(
        "--module",
        type=click.Choice(MODULE_NAMES),
        default="mlp",
        show_default=True,
        help=help_text,
    )


features_option = click.option(
    "--features",
    type=click.Choice(FEATURE_KINDS),
    default="concept",
    show_default=True,
    help="Concept means s(x) or criterion answers z(x) as the module's input.",
)


def _plot_option(default: str) -> Callable[..., Any]:
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=default,
        show_default=True,
        callback=claims_stdout,
        help="PNG file to draw (- for standard output).",
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


def _num(value: float) -> str:
    """A metric to 3 decimals, or n/a when it is undefined (e.g. BA of a one-class language)."""
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    table = Table(*header, title=title)
    for row in rows:
        table.add_row(*row)
    console.out.print(table)


def _write_json(path: Path | None, payload: Any) -> None:
    if path is not None:
        write_json(path, payload)


SEEDS_OPTION = click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Train each module with N seeds (random_state 42, 43, ...) and average their "
    "probabilities, as `fit --seeds` does (the paper averages 3 runs).",
)


@analyze.command("sample-efficiency")
@train_option
@targets_option
@criteria_option
@_module_option("Transfer module trained at every share of the English data.")
@features_option
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Repeats of each share: each draws the share anew and seeds the module anew.",
)
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
    """How many English labels are needed (paper 5.2, Figure 2).

    Example: ucsj analyze sample-efficiency --train en.scores.jsonl --targets fr.scores.jsonl
    --criteria criteria.json --plot sample-efficiency.png
    """
    from ucsj.analysis import FRACTIONS, sample_efficiency
    from ucsj.plots import plot_efficiency

    refuse_overwriting_inputs([json_path, plot_path], [train, *targets, criteria])
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
@click.option(
    "--reference",
    default="en",
    show_default=True,
    help="The language whose importance profile the others are compared with.",
)
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
    """Which criteria carry the signal in each language (paper 5.3, Figures 3 and 4).

    Example: ucsj analyze importance en.scores.jsonl fr.scores.jsonl hi.scores.jsonl
    --criteria criteria.json
    """
    from ucsj.analysis import criteria_importance
    from ucsj.plots import plot_importance

    refuse_overwriting_inputs([json_path, plot_path, heatmap_path], [*scores, criteria])
    criteria_set = load_criteria(criteria)
    result = criteria_importance(_read_many(scores), criteria_set, reference=reference)
    rows = []
    for lang in result.profiles:
        top = sorted(
            zip(result.criteria, result.profiles[lang], strict=True), key=lambda kv: -kv[1]
        )[:3]
        rows.append(
            [
                lang,
                _num(result.spearman[lang]),
                _num(result.ba_all[lang]),
                _num(result.ba_top[lang]),
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
    questions = {q.id: q.text for q in criteria_set.questions}
    plot_importance(result, plot_path, heatmap_path, questions)
    console.info(f"plots: {plot_path}, {heatmap_path}")


@analyze.command("modules")
@train_option
@targets_option
@criteria_option
@features_option
@SEEDS_OPTION
@json_option
@_plot_option("modules.png")
def analyze_modules(
    train: Path,
    targets: tuple[Path, ...],
    criteria: Path,
    features: str,
    seeds: int,
    json_path: Path | None,
    plot_path: Path,
) -> None:
    """Every transfer module trained on English, BA on each target (paper 5.4, Table 2).

    Example: ucsj analyze modules --train en.scores.jsonl --targets fr.scores.jsonl
    --criteria criteria.json
    """
    from ucsj.analysis import module_comparison
    from ucsj.plots import plot_bars

    refuse_overwriting_inputs([json_path, plot_path], [train, *targets, criteria])
    table = module_comparison(
        _binary_scores(train),
        _read_many(targets),
        load_criteria(criteria),
        features=features,
        seeds=seeds,
    )
    langs = [k for k in next(iter(table.values())) if k != "avg"]
    _print_table(
        "Balanced accuracy by transfer module",
        ["module", *langs, "avg"],
        [[m, *(_num(row[k]) for k in [*langs, "avg"])] for m, row in table.items()],
    )
    _write_json(json_path, table)
    plot_bars(
        {m: row["avg"] for m, row in table.items()},
        plot_path,
        "Transfer modules: BA averaged over target languages",
        "balanced accuracy",
        "Transfer modules: balanced accuracy of each module trained on English, averaged over "
        f"the target languages ({', '.join(langs)})",
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
@_module_option("Transfer module trained on English.")
@SEEDS_OPTION
@json_option
@_plot_option("aggregator.png")
def analyze_aggregator(
    train: Path,
    targets: tuple[Path, ...],
    criteria: Path,
    llm_paths: tuple[Path, ...],
    module: str,
    seeds: int,
    json_path: Path | None,
    plot_path: Path,
) -> None:
    """Trained transfer module vs the LLM as a training-free aggregator (paper 5.5, Table 3).

    Example: ucsj analyze aggregator --train en.scores.jsonl --targets fr.scores.jsonl
    --criteria criteria.json --llm fr.agg.jsonl
    """
    from ucsj.analysis import average_ba
    from ucsj.plots import plot_bars
    from ucsj.transfer import fit_judge, predict_records

    refuse_overwriting_inputs([json_path, plot_path], [train, *targets, criteria, *llm_paths])
    criteria_set = load_criteria(criteria)
    judge = fit_judge(_binary_scores(train), criteria_set, module=module, seeds=seeds)
    target_records = _read_many(targets)
    trained = average_ba(predict_records(judge, target_records))
    llm_rows = [row for path in llm_paths for _, row in read_json_lines(path)]
    llm = average_ba(llm_rows, [lang for lang in trained if lang != "avg"])
    langs = [k for k in trained if k != "avg"]
    _print_table(
        "Trained module vs LLM aggregator",
        ["aggregation", *langs, "avg"],
        [
            [f"UCS (trained, {module})", *(_num(trained[k]) for k in [*langs, "avg"])],
            ["UCS (LLM)", *(_num(llm.get(k, float("nan"))) for k in [*langs, "avg"])],
        ],
    )
    _write_json(json_path, {"trained": trained, "llm": llm, "module": module})
    plot_bars(
        {f"trained ({module})": trained["avg"], "LLM aggregator": llm["avg"]},
        plot_path,
        "Aggregation: BA averaged over target languages",
        "balanced accuracy",
        f"Aggregation: the trained module ({module}) against the LLM as a training-free "
        f"aggregator, balanced accuracy averaged over the target languages ({', '.join(langs)})",
    )
    console.info(f"plot: {plot_path}")


def _decomposition_runs(
    runs: tuple[str, ...], module: str, store: ResponseCache | None
) -> dict[str, dict[str, Any]]:
    from ucsj.analysis import average_ba, decomposition_costs, recorded_latencies
    from ucsj.transfer import fit_judge, predict_records

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
@_module_option("Transfer module trained on English.")
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
    the cache recorded, and BA averaged over target languages; the plot draws each cost
    against BA.

    Example: ucsj analyze decomposition --run "per-concept=criteria.json,en.pc.jsonl,fr.pc.jsonl"
    --run "joint=criteria.json,en.j.jsonl,fr.j.jsonl" --cache-dir cache
    """
    from ucsj.plots import plot_decomposition

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
    plot_decomposition(results, plot_path)
    console.info(f"plot: {plot_path}")


@analyze.command("shift")
@click.argument("scores", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--judge",
    "judge_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="judge.skops from fit: its English answer reference is what SCORES are compared with.",
)
@json_option
@_plot_option("shift.png")
def analyze_shift(
    scores: tuple[Path, ...], judge_path: Path, json_path: Path | None, plot_path: Path
) -> None:
    """Does the judge still carry over? How far each language's criterion answers moved from the
    English answers the judge was trained on; needs no labels in SCORES.

    shift = mean over criteria of the Wasserstein-1 distance between the language's P(yes)
    distribution and English's (0: same answers; 1: every certain no became a certain yes).

    Example: ucsj analyze shift --judge judge.skops fr.scores.jsonl hi.scores.jsonl
    """
    from ucsj.judge_file import load_judge
    from ucsj.plots import plot_shift
    from ucsj.shift import shift_report

    refuse_overwriting_inputs([json_path, plot_path], [*scores, judge_path])
    judge = load_judge(judge_path)
    records = [r for path in scores for r in read_scores(path)]
    result = shift_report(judge, records, source=", ".join(map(str, scores)))
    if not result.languages:
        raise InputError("no successfully scored samples to compare", path=str(scores[0]))
    print_shift(result)
    _write_json(json_path, result.to_json())
    plot_shift(result, plot_path)
    console.info(f"plot: {plot_path}")


def print_shift(result: ShiftReport) -> None:
    """The shift table, each language's most moved criteria, and how to read them."""
    from ucsj.report import fmt
    from ucsj.shift import CRITERION_WARNING, SHIFT_WARNING

    def num(value: float | None) -> str:
        return "–" if value is None else fmt(value)

    rows = [
        [
            f"{result.reference} (ref)",
            "",
            fmt(0.0),  # the reference against itself
            "",
            "",
            "",
            num(result.reference_pass_rate),
            "",
            fmt(result.reference_unreadable),
            "",
        ]
    ]
    for lang, s in result.languages.items():
        rows.append(
            [
                lang,
                str(s.n),
                f"{s.shift:.3f}" + (" !" if s.warn else ""),
                f"{s.chance:.3f}",
                num(s.unexplained),
                num(s.label_free),
                num(s.predicted_pass_rate),
                num(s.implied_pass_rate),
                fmt(s.unreadable),
                ", ".join(c.id for c in s.top),
            ]
        )
    _print_table(
        f"Shift of criterion answers from the {result.reference} reference "
        f"(! warned: beyond {SHIFT_WARNING}, or one criterion beyond {CRITERION_WARNING}, "
        "and beyond chance)",
        [
            "lang",
            "n",
            "shift",
            "chance",
            "unexplained",
            "label-free",
            "pass rate",
            "implied",
            "unreadable",
            "most moved",
        ],
        rows,
    )
    for lang, s in result.languages.items():
        for c in s.top:
            console.out.print(
                f'{lang}: {c.id} "{c.text}" {c.direction} '
                f"({c.mean_change:+.3f}; shift {c.shift:.3f})",
                markup=False,
            )
    console.out.print(
        "shift: mean W1 distance of each criterion's P(yes) from the reference (0 = same "
        "answers); chance: what a sample of this size from the reference itself shows. A "
        "language whose outputs are genuinely better or worse moves too (label shift): "
        "'unexplained' is the shift left after the best mix of English's pass and fail "
        "answers (at the 'implied' pass rate; 'pass rate' is the judge's), 'label-free' the "
        "shift of the criteria whose English answers do not depend on the label. High shift "
        "with both near chance: the outputs differ, the judge likely still reads them; high "
        "unexplained: the model answers the criteria differently in this language.",
        markup=False,
    )
