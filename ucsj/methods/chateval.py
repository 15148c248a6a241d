"""ChatEval (Chan et al., ICLR 2024; thunlp/ChatEval): a debate between referees.

As the reference's two-role, two-turn setting runs it: General Public and Critic speak in turn
(sequential order, everyone sees everything) for two rounds. Each call is the task prompt with
the speaker's role, the discussion so far as assistant messages ("Name: words"), and a last
user message that is empty except in the final round, where it asks for the verdict. Each
referee's final-round verdict is a vote.
"""

from __future__ import annotations

import numpy as np

from ucsj.data import Sample
from ucsj.methods.base import Context, Judgement, verdict_judgement
from ucsj.prompts import render, sample_values

ROUNDS = 2
ROLES = (("General Public", "chateval_reader"), ("Critic", "chateval_critic"))


async def chateval(ctx: Context, sample: Sample) -> Judgement:
    """Two rounds of General Public then Critic; the majority of their final-round verdicts,
    a tie broken by the mean of their P(yes)."""
    values = sample_values(ctx.task, sample)
    system = render("system")
    discussion: list[tuple[str, str]] = []  # (speaker, words), in speaking order
    votes: list[Judgement] = []
    for round_no in range(1, ROUNDS + 1):
        final = round_no == ROUNDS
        for name, role in ROLES:
            prompt = render("chateval_prompt", role=render(role, **values), speaker=name, **values)
            messages = [("system", system), ("user", prompt)]
            messages += [("assistant", f"{speaker}: {words}") for speaker, words in discussion]
            messages.append(("user", render("chateval_final") if final else ""))
            # logprobs in the final round only: a split panel is settled by the mean P(yes)
            reply = await ctx.converse(messages, "chateval.turn", logprobs=final)
            discussion.append((name, reply.text.strip()))
            if final:
                votes.append(verdict_judgement(reply))
    return aggregate_panel(votes)


def aggregate_panel(votes: list[Judgement]) -> Judgement:
    """Majority of the verdicts; a tie (or missing verdicts) goes to the mean P(yes)."""
    preds = [v.pred for v in votes if v.pred is not None]
    probs = [v.prob for v in votes if v.prob is not None]
    mean = float(np.mean(probs)) if probs else None
    ones = sum(preds)
    if preds and ones * 2 != len(preds):
        return Judgement(int(ones * 2 > len(preds)), mean)
    return Judgement(None if mean is None else int(mean >= 0.5), mean)
