"""What every baseline judge shares: its result, its options, and the context it calls the
LLM through (client, cache, prompts, fencing)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ucsj.answers import final_verdict
from ucsj.criteria import CriteriaSet
from ucsj.data import Sample
from ucsj.llm import ChatRequest, Completion, LLMClient
from ucsj.prompts import render
from ucsj.scores import ScoreRecord
from ucsj.tasks import Task


@dataclass(frozen=True)
class Judgement:
    # binary: 1 pass / 0 fail; pointwise: the score; pairwise: "a" or "b"; None: no verdict
    pred: int | str | None
    prob: float | None  # P(pass) when the method gives one
    extra: dict[str, Any] = field(default_factory=dict)  # method-specific values (item scores)


@dataclass
class JudgeOptions:
    guidelines: str | None = None  # guidelines: overrides the task's
    threshold: float = 0.5  # rocketeval, checkeval
    scores: dict[str, ScoreRecord] | None = None  # llm-aggregator: sample id -> scores
    criteria: CriteriaSet | None = None  # llm-aggregator
    calibrator: Any = None  # rocketeval --calibrate-on: a fitted tree ensemble


@dataclass
class Context:
    client: LLMClient
    task: Task
    options: JudgeOptions

    async def ask(
        self,
        prompt: str,
        max_tokens: int,
        *,
        system: str | None = None,
        logprobs: bool = True,
        allow_truncated: bool = True,
    ) -> Completion:
        """One call. Long free-text answers skip logprobs: llama-cpp-python spends ~0.2 s per
        generated token on them, and only a verdict token's alternatives would be used."""
        messages = [("system", system or render("system")), ("user", prompt)]
        request = ChatRequest.chat(
            self.client.settings.model,
            messages,
            max_tokens=max_tokens,
            logprobs=logprobs,
            top_logprobs=5 if logprobs else 0,
        )
        return await self.client.complete(request, allow_truncated=allow_truncated)


MethodFn = Callable[[Context, Sample], Awaitable[Judgement]]
ChooseFn = Callable[[Context, Sample, str, str], Awaitable[str | None]]
SWAP = {"a": "b", "b": "a"}


def verdict_judgement(completion: Completion) -> Judgement:
    """The verdict on a reply's final line, with P(pass) from its token when there is one."""
    verdict = final_verdict(completion)
    prob = (
        verdict.prob
        if verdict.prob is not None
        else (None if verdict.pred is None else float(verdict.pred))
    )
    return Judgement(verdict.pred, prob)


async def both_orders(ctx: Context, sample: Sample, choose: ChooseFn) -> Judgement:
    """A pairwise verdict as given and with the responses swapped; the swapped verdict is
    mapped back to the original positions (`pred_swapped`)."""
    first, second = sample.output, sample.output_b or ""
    forward, backward = await asyncio.gather(
        choose(ctx, sample, first, second), choose(ctx, sample, second, first)
    )
    return Judgement(forward, None, {"pred_swapped": SWAP.get(backward or "")})


def threshold_judgement(
    ctx: Context, values: list[float | None], extra: dict[str, Any]
) -> Judgement:
    """A checklist's mean score, passing at the options' threshold."""
    readable = [v for v in values if v is not None]
    if not readable:
        return Judgement(None, None, extra)
    score = float(np.mean(readable))
    return Judgement(int(score >= ctx.options.threshold), score, extra)
