"""Annotation guidelines (UCS paper, A.6): the annotators' guidelines in the prompt."""

from __future__ import annotations

from ucsj.data import Sample
from ucsj.errors import InputError
from ucsj.methods.base import Context, Judgement, verdict_judgement
from ucsj.prompts import render, sample_values


async def guidelines(ctx: Context, sample: Sample) -> Judgement:
    """AG (paper A.6): the annotators' guidelines in the prompt, then a verdict line."""
    text = ctx.options.guidelines or ctx.task.guidelines
    if not text:
        raise InputError(f"task '{ctx.task.name}' has no guidelines: pass --guidelines FILE")
    reply = await ctx.ask(
        render("judge_guidelines", guidelines=text, **sample_values(ctx.task, sample)),
        "guidelines.reasoning",
    )
    return verdict_judgement(reply)
