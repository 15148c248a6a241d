"""CheckEval (Lee et al.): a fixed checklist per aspect, answered Yes/No question by question."""

from __future__ import annotations

import asyncio

from ucsj.answers import numbered_answers
from ucsj.data import Sample
from ucsj.errors import InputError
from ucsj.methods.base import Context, Judgement, threshold_judgement
from ucsj.prompts import numbered, render, sample_values


async def checkeval(ctx: Context, sample: Sample) -> Judgement:
    """CheckEval (Lee et al.): one fixed checklist per aspect, one call per aspect answered as
    `Q1: Yes` lines; score = the proportion of yes."""
    if not ctx.task.checkeval:
        raise InputError(f"task '{ctx.task.name}' has no [checkeval] checklist")
    values = sample_values(ctx.task, sample)
    replies = await asyncio.gather(
        *(
            ctx.ask(
                render("score_questions", questions=numbered(list(qs)), **values),
                "checkeval.answers",
            )
            for _, qs in ctx.task.checkeval
        )
    )
    answers: list[float | None] = []
    for (_, qs), reply in zip(ctx.task.checkeval, replies, strict=True):
        answers += [
            None if v is None else float(v >= 0.5) for v in numbered_answers(reply, len(qs))
        ]
    return threshold_judgement(ctx, answers, {"items": answers})
