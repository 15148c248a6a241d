"""Every baseline call's token cap, in one table, with where the number comes from.

A free-text reply is read whole (reasoning, a checklist, a translation): one that stops at its
cap (`finish_reason: length`) is flagged as cut off in the predictions and the report, never
silently read as a reply without a verdict. Verdict-token calls read the first token's
alternatives and are short by design.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cap:
    tokens: int
    free_text: bool  # read whole: stopping at the cap is a cut-off reply
    why: str


CAPS: dict[str, Cap] = {
    "zero-shot.answer": Cap(4, False, "one verdict word; its token's alternatives are read"),
    "cot.reasoning": Cap(2048, True, "room for the reasoning before the verdict line"),
    "guidelines.reasoning": Cap(2048, True, "room for the reasoning before the verdict line"),
    "llm-aggregator.reasoning": Cap(2048, True, "room for the reasoning before the verdict"),
    "chateval.turn": Cap(512, True, "ChatEval's config: max_tokens 512 for each agent"),
    "rocketeval.checklist": Cap(1024, True, "RocketEval's checklist step: max_tokens 1024"),
    "rocketeval.grade": Cap(1, False, "RocketEval's grading: max_tokens 1, top 5 logprobs"),
    "checkeval.answers": Cap(1024, True, "room for every `Q1: Yes` line of one aspect"),
    "checkeval.questions": Cap(2048, True, "room for an aspect's expanded question list"),
    "ce-judge.concepts": Cap(8192, True, "CE-Judge's reference: max_tokens 8192 on every call"),
    "ce-judge.checklist": Cap(8192, True, "CE-Judge's reference: max_tokens 8192 on every call"),
    "ce-judge.judgment": Cap(8192, True, "CE-Judge's reference: max_tokens 8192 on every call"),
    "ce-judge.translate": Cap(2048, True, "one chunk of whole sentences (TRANSLATE_CHUNK)"),
}
