"""Zero-shot (UCS paper, section 4): the task's question asked directly."""

from __future__ import annotations

from ucsj.answers import expected_score, first_choice, single_answer
from ucsj.data import Sample
from ucsj.methods.base import Context, Judgement, both_orders
from ucsj.prompts import pair_block, render, sample_values


async def zero_shot(ctx: Context, sample: Sample) -> Judgement:
    """The task's question asked directly; the first word is the verdict. Pointwise: the
    score, read as the expected value over the answer token's alternatives. Pairwise: A or
    B, asked in both orders."""
    if ctx.task.kind == "pairwise":
        return await both_orders(ctx, sample, _choice)
    values = sample_values(ctx.task, sample)
    if ctx.task.kind == "pointwise":
        low, high = ctx.task.scale
        prompt = render(
            "judge_zero_shot_pointwise",
            guide=ctx.task.guide(),
            low=str(low),
            high=str(high),
            **values,
        )
        score = expected_score(await ctx.ask(prompt, "zero-shot.answer"), low, high)
        return Judgement(None if score is None else round(score, 6), None)
    p = single_answer(await ctx.ask(render("judge_zero_shot", **values), "zero-shot.answer"))
    return Judgement(None if p is None else int(p >= 0.5), p)


async def _choice(ctx: Context, sample: Sample, first: str, second: str) -> str | None:
    prompt = render(
        "judge_zero_shot_pairwise",
        question=ctx.task.question,
        pair=pair_block(ctx.task, sample, first, second),
    )
    return first_choice(await ctx.ask(prompt, "zero-shot.answer"))
