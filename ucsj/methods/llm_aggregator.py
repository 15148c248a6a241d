"""UCS-LLM (UCS paper, 5.5): the LLM, not a classifier, aggregates the criterion answers."""

from __future__ import annotations

from ucsj.data import Sample
from ucsj.errors import InputError
from ucsj.methods.base import Context, Judgement, verdict_judgement
from ucsj.prompts import render, sample_values


async def llm_aggregator(ctx: Context, sample: Sample) -> Judgement:
    """UCS-LLM (paper 5.5): the LLM turns the sample's criterion answers into a verdict."""
    scores, criteria = ctx.options.scores, ctx.options.criteria
    if scores is None or criteria is None:
        raise InputError("llm-aggregator needs --scores (from `ucsj score`) and --criteria")
    record = scores.get(sample.id)
    if record is None:
        raise InputError(f"sample '{sample.id}' is not in the --scores file")
    lines = []
    for question in criteria.questions:
        z = record.z.get(question.id)
        if z is None:
            answer = "unreadable"
        else:
            p_yes = 1.0 - z if question.yes_means == "bad" else z
            answer = f"{'Yes' if p_yes >= 0.5 else 'No'} ({p_yes:.2f})"
        note = " [Yes means bad]" if question.yes_means == "bad" else ""
        lines.append(f"- {question.text}{note} -> {answer}")
    reply = await ctx.ask(
        render("judge_aggregator", criteria="\n".join(lines), **sample_values(ctx.task, sample)),
        "llm-aggregator.reasoning",
    )
    return verdict_judgement(reply)
