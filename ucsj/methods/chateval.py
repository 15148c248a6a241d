"""ChatEval (Chan et al.): a multi-agent debate between a general reader and a critic."""

from __future__ import annotations

import numpy as np

from ucsj.data import Sample
from ucsj.methods.base import Context, Judgement, verdict_judgement
from ucsj.prompts import render, sample_values

CHATEVAL_ROUNDS = 2


async def chateval(ctx: Context, sample: Sample) -> Judgement:
    """A general reader and a critic speak in turn for two rounds, seeing each other's words;
    majority of their final verdicts, a tie broken by the mean of their P(yes)."""
    values = sample_values(ctx.task, sample)
    roles = (("Reader", render("chateval_reader")), ("Critic", render("chateval_critic")))
    discussion: list[str] = []
    last: dict[str, Judgement] = {}
    for round_no in range(1, CHATEVAL_ROUNDS + 1):
        for name, system in roles:
            prompt = render(
                "chateval_turn",
                discussion="\n\n".join(discussion) or "(none yet)",
                round=str(round_no),
                rounds=str(CHATEVAL_ROUNDS),
                **values,
            )
            # logprobs kept: a split panel is settled by the mean of the final P(yes)
            reply = await ctx.ask(prompt, "chateval.turn", system=system, logprobs=True)
            discussion.append(f"{name}: {reply.text.strip()}")
            last[name] = verdict_judgement(reply)
    return aggregate_panel(list(last.values()))


def aggregate_panel(votes: list[Judgement]) -> Judgement:
    """Majority of the verdicts; a tie (or missing verdicts) goes to the mean P(yes)."""
    preds = [v.pred for v in votes if v.pred is not None]
    probs = [v.prob for v in votes if v.prob is not None]
    mean = float(np.mean(probs)) if probs else None
    ones = sum(preds)
    if preds and ones * 2 != len(preds):
        return Judgement(int(ones * 2 > len(preds)), mean)
    return Judgement(None if mean is None else int(mean >= 0.5), mean)
