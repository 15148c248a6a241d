"""`ucsj analyze`: the UCS paper's section 5 on the user's scores."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    cache_dir_option,
    cli,
    file_option,
)
from ucsj.criteria import load_criteria
from ucsj.errors import InputError
from ucsj.io import read_json_lines, write_json
from ucsj.llm import ResponseCache
from ucsj.llm.cache import default_cache_dir
from ucsj.scores import ScoreRecord, read_scores
from ucsj.transfer_options import FEATURE_KINDS, MODULE_NAMES


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
@_module_option("Transfer module trained at every share of the English data.")
@features_option
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Repetitions with other splits and subsamples; the plot shows mean ± std.",
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
    questions = {q.id: q.text for q in criteria_set.questions}
    plot_importance(result, plot_path, heatmap_path, questions)
    console.info(f"plots: {plot_path}, {heatmap_path}")


@analyze.command("modules")
@train_option
@targets_option
@criteria_option
@features_option
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
    """Every transfer module trained on English, BA on each target (paper 5.4, Table 2).

    Example: ucsj analyze modules --train en.scores.jsonl --targets fr.scores.jsonl
    --criteria criteria.json
    """
    from ucsj.analysis import module_comparison
    from ucsj.plots import plot_bars

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
    """Trained transfer module vs the LLM as a training-free aggregator (paper 5.5, Table 3).

    Example: ucsj analyze aggregator --train en.scores.jsonl --targets fr.scores.jsonl
    --criteria criteria.json --llm fr.agg.jsonl
    """
    from ucsj.analysis import average_ba
    from ucsj.plots import plot_bars
    from ucsj.transfer import fit_judge, predict_records

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
