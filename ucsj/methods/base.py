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
from ucsj.errors import CacheMissError
from ucsj.llm import ChatRequest, Completion, LLMClient
from ucsj.methods.caps import CAPS
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
    threshold: float = 0.5  # rocketeval, checkeval: pass at this checklist score
    scores: dict[str, ScoreRecord] | None = None  # llm-aggregator: sample id -> scores
    criteria: CriteriaSet | None = None  # llm-aggregator
    reweighting: dict[str, Any] | None = None  # rocketeval: input key -> QueryReweighting
    checklist: list[Any] | None = None  # checkeval: the generated aspects (gen-checklist)


@dataclass
class Context:
    """What a method calls the LLM through. `for_sample` gives each sample its own record of
    cut-off replies; `once` shares work between the samples of a run (a checklist per input)."""

    client: LLMClient
    task: Task
    options: JudgeOptions
    cut_off: list[str] = field(default_factory=list)  # the caps this sample's replies hit
    shared: dict[Any, asyncio.Future[Any]] = field(default_factory=dict)

    def for_sample(self) -> Context:
        return Context(self.client, self.task, self.options, [], self.shared)

    async def ask(self, prompt: str, step: str) -> Completion:
        """One call with the system prompt and one user message, capped as CAPS[step] says."""
        return await self.converse([("system", render("system")), ("user", prompt)], step)

    async def converse(
        self, messages: list[tuple[str, str]], step: str, *, logprobs: bool | None = None
    ) -> Completion:
        """One call with the given messages. Free-text replies skip logprobs unless asked:
        llama-cpp-python spends ~0.2 s per generated token on them, and only a verdict token's
        alternatives would be used. A free-text reply stopped by its cap is recorded."""
        cap = CAPS[step]
        wanted = not cap.free_text if logprobs is None else logprobs
        request = ChatRequest.chat(
            self.client.settings.model,
            messages,
            max_tokens=cap.tokens,
            logprobs=wanted,
            top_logprobs=5 if wanted else 0,
        )
        try:
            completion = await self.client.complete(request, allow_truncated=True)
        except CacheMissError as exc:  # replay: name the step; the runner adds the sample
            raise CacheMissError(f"step '{step}': {exc}") from None
        if cap.free_text and completion.truncated:
            self.cut_off.append(step)
        return completion

    async def once(self, key: Any, make: Callable[[], Awaitable[Any]]) -> Any:
        """`make()`'s result, computed once per key for the whole run, even when samples
        sharing the key are judged concurrently."""
        future = self.shared.get(key)
        if future is None:
            future = self.shared[key] = asyncio.ensure_future(make())
        return await asyncio.shield(future)


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
