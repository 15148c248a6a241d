"""`ucsj convert`: benchmark files to sample JSONL."""

from __future__ import annotations

import itertools
from pathlib import Path

import click

from ucsj import console
from ucsj.cli.base import (
    CONTEXT,
    _where,
    cli,
    lang_option,
    output_option,
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
from ucsj.io import refuse_overwriting_inputs


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
    refuse_overwriting_inputs([output], raw)
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
    refuse_overwriting_inputs([output], [raw])
    _report_conversion(write_samples(mface_samples(raw, rule, threshold, lang), output), output)


@convert.command("mm-eval")
@click.argument("raw", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--subset",
    "subsets",
    multiple=True,
    help="Keep only these subsets (chat, reasoning, safety, lang_res, ...). "
    "[default: chat and reasoning, the subsets CE-Judge evaluates]",
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
    refuse_overwriting_inputs([output], [raw])
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
    refuse_overwriting_inputs([output], [raw])
    _report_conversion(write_samples(liteval_samples(raw, score_column, shift), output), output)


def _report_conversion(summary: ConvertSummary, output: Path) -> None:
    console.info(f"wrote to {_where(output)}: {summary.describe()}")
