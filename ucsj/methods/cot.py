"""Chain of thought (UCS paper, section 4): reasoning step by step, then a verdict line."""

from __future__ import annotations

from ucsj.data import Sample
from ucsj.methods.base import Context, Judgement, verdict_judgement
from ucsj.prompts import render, sample_values


async def cot(ctx: Context, sample: Sample) -> Judgement:
    """Step-by-step reasoning, then a verdict on a final line."""
    reply = await ctx.ask(render("judge_cot", **sample_values(ctx.task, sample)), "cot.reasoning")
    return verdict_judgement(reply)
