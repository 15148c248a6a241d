"""Stage 2: every sample answers every criterion question; the answers form z(x) and s(x).

Granularities (DESIGN.md, "Criterion responses"): `per-concept` (one call per concept, the
default), `joint` (one call for all questions) and `per-criterion` (one call per question,
max_tokens 1, P(yes) from top_logprobs).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ucsj.answers import numbered_answers, single_answer
from ucsj.criteria import CriteriaSet, Question
from ucsj.data import Sample, SampleFile
from ucsj.io import dump_json_line, open_output
from ucsj.llm import ChatRequest, Completion, LLMClient, LLMSettings
from ucsj.llm.client import RequestFailed
from ucsj.prompts import numbered, render, sample_values
from ucsj.tasks import Task

SCORINGS = ("per-concept", "joint", "per-criterion")
# A scoring response cut off at max_tokens is still the model's deterministic answer to the
# request as sent (max_tokens is in the cache key): the questions it answered before the cut
# count, the rest are unreadable (null, counted). So it is accepted and cached; re-asking would
# only get the same cut-off answer again.
TOKENS_PER_ANSWER = 8  # "Q12: Yes" plus a newline, with room for a stray word
PER_CRITERION_TOP_LOGPROBS = 5


@dataclass(frozen=True)
class Call:
    """One LLM call of a sample: which questions it answers and the request."""

    name: str  # concept id, question id or "all"; keys the raw answers in the scores record
    questions: tuple[Question, ...]
    request: ChatRequest
    single: bool = False  # one question answered by a single token (per-criterion)


def plan_calls(
    task: Task, criteria: CriteriaSet, sample: Sample, scoring: str, model: str
) -> list[Call]:
    """The calls that score one sample. Shared prefix first, the question(s) last."""
    values = sample_values(task, sample)
    system = render("system")

    def request(prompt: str, max_tokens: int, top_logprobs: int = 5) -> ChatRequest:
        return ChatRequest.chat(
            model,
            [("system", system), ("user", prompt)],
            max_tokens=max_tokens,
            top_logprobs=top_logprobs,
        )

    def grouped(name: str, questions: tuple[Question, ...]) -> Call:
        prompt = render(
            "score_questions", questions=numbered([q.text for q in questions]), **values
        )
        return Call(name, questions, request(prompt, TOKENS_PER_ANSWER * len(questions) + 16))

    if scoring == "per-concept":
        return [grouped(c.id, c.questions) for c in criteria.concepts]
    if scoring == "joint":
        return [grouped("all", tuple(criteria.questions))]
    if scoring == "per-criterion":
        return [
            Call(
                q.id,
                (q,),
                request(
                    render("score_criterion", **{**values, "question": q.text}),
                    1,
                    PER_CRITERION_TOP_LOGPROBS,
                ),
                single=True,
            )
            for q in criteria.questions
        ]
    raise ValueError(f"unknown scoring granularity {scoring!r}")


def call_values(call: Call, completion: Completion) -> list[float | None]:
    """Each question's value in [0, 1], oriented so that 1 means good; None when unreadable."""
    if call.single:
        raw = [single_answer(completion)]
    else:
        raw = numbered_answers(completion, len(call.questions))
    return [
        None if v is None else (1.0 - v if q.yes_means == "bad" else v)
        for q, v in zip(call.questions, raw, strict=True)
    ]


def concept_means(criteria: CriteriaSet, z: dict[str, float | None]) -> dict[str, float | None]:
    """s(x): each concept's mean over its readable questions (None when none is readable)."""
    s: dict[str, float | None] = {}
    for concept in criteria.concepts:
        vals = [z[q.id] for q in concept.questions if z.get(q.id) is not None]
        s[concept.id] = round(sum(vals) / len(vals), 6) if vals else None  # type: ignore[arg-type]
    return s


@dataclass
class ScoreSummary:
    samples: int = 0
    failed: int = 0
    unreadable: int = 0
    values: int = 0
    langs: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (sample id, reason)


@dataclass
class ScoredOutput:
    """One output's criterion answers: z, the raw answers, their cache keys and failures."""

    z: dict[str, float | None]
    answers: dict[str, str | None]
    keys: dict[str, str]  # each answer's cache entry
    usage: dict[str, int]
    errors: list[str]


async def score_output(
    client: LLMClient, task: Task, criteria: CriteriaSet, sample: Sample, scoring: str
) -> ScoredOutput:
    """Answer every question about `sample.output`."""
    calls = plan_calls(task, criteria, sample, scoring, client.settings.model)
    # Hits are read synchronously: a replayed run then creates no task per call.
    results: list[Any] = [client.cached(c.request) for c in calls]
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        fetched = await asyncio.gather(
            *(client.complete(calls[i].request, allow_truncated=True) for i in missing),
            return_exceptions=True,
        )
        for i, result in zip(missing, fetched, strict=True):
            results[i] = result
    scored = ScoredOutput(
        z={q.id: None for q in criteria.questions},
        answers={},
        keys={call.name: call.request.key for call in calls},
        usage={"calls": len(calls), "prompt_tokens": 0, "completion_tokens": 0},
        errors=[],
    )
    for call, result in zip(calls, results, strict=True):
        if isinstance(result, RequestFailed):
            scored.errors.append(f"{call.name}: {result}")
            scored.answers[call.name] = None
            continue
        if isinstance(result, BaseException):
            raise result  # a cache miss in replay mode or a bug: stop the run
        scored.answers[call.name] = result.text
        for key in ("prompt_tokens", "completion_tokens"):
            scored.usage[key] += result.usage.get(key, 0)
        for question, value in zip(call.questions, call_values(call, result), strict=True):
            scored.z[question.id] = None if value is None else round(value, 6)
    return scored


async def score_sample(
    client: LLMClient, task: Task, criteria: CriteriaSet, sample: Sample, scoring: str
) -> dict[str, Any]:
    """The scores record of one sample. A pairwise sample's responses are scored each on its
    own, the second into `z_b`, `s_b`, `answers_b` and `keys_b`."""
    outputs = {"": sample.output}
    if task.kind == "pairwise" and sample.output_b is not None:
        outputs["_b"] = sample.output_b
    results = await asyncio.gather(
        *(
            score_output(client, task, criteria, replace(sample, output=text), scoring)
            for text in outputs.values()
        )
    )
    scored = dict(zip(outputs, results, strict=True))
    record: dict[str, Any] = {
        "id": sample.id,
        "lang": sample.lang,
        **sample.gold(task.kind),
        **dict(sample.groups),
        "criteria": criteria.fingerprint,
        "model": client.settings.model,
        "scoring": scoring,
    }
    for suffix, out in scored.items():
        record[f"z{suffix}"] = out.z
        record[f"s{suffix}"] = concept_means(criteria, out.z)
    for suffix, out in scored.items():
        record[f"answers{suffix}"] = out.answers
        record[f"keys{suffix}"] = out.keys
    record["usage"] = {
        key: sum(out.usage[key] for out in scored.values())
        for key in ("calls", "prompt_tokens", "completion_tokens")
    }
    errors = [
        f"{'response b ' if suffix else ''}{e}"
        for suffix, out in scored.items()
        for e in out.errors
    ]
    if errors:
        record["error"] = "; ".join(errors)
    return record


async def in_order(
    items: Iterable[Any], work: Callable[[Any], Awaitable[Any]], window: int
) -> AsyncIterator[Any]:
    """Run `work` on up to `window` items at once; yield the results in input order."""
    pending: deque[asyncio.Task[Any]] = deque()
    try:
        for item in items:
            pending.append(asyncio.ensure_future(work(item)))
            if len(pending) >= window:
                yield await pending.popleft()
        while pending:
            yield await pending.popleft()
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


async def score_stream(
    client: LLMClient, task: Task, criteria: CriteriaSet, samples: Iterable[Sample], scoring: str
) -> AsyncIterator[dict[str, Any]]:
    window = max(4, client.settings.concurrency * 2)
    async for record in in_order(
        samples, lambda s: score_sample(client, task, criteria, s, scoring), window
    ):
        yield record


def score_file(
    data: str | Path,
    criteria: CriteriaSet,
    task: Task,
    output: str | Path,
    settings: LLMSettings,
    *,
    lang: str | None = None,
    scoring: str = "per-concept",
    on_record: Callable[[dict[str, Any]], None] | None = None,
    on_validated: Callable[[int], None] | None = None,
) -> ScoreSummary:
    """Score every sample of `data` into `output` (JSONL, input order, written atomically).

    The whole file is validated before the first request. Samples whose requests failed are
    written with an `error` and counted; their successful calls are cached for the rerun.
    """
    if scoring not in SCORINGS:
        raise ValueError(f"unknown scoring granularity {scoring!r}")
    samples = SampleFile(data, task, lang)
    count = samples.validate().count
    if on_validated is not None:
        on_validated(count)
    summary = ScoreSummary()

    async def run() -> None:
        async with LLMClient(settings) as client:
            with open_output(output) as out:
                async for record in score_stream(client, task, criteria, samples, scoring):
                    out.write(dump_json_line(record))
                    _tally(summary, record)
                    if on_record is not None:
                        on_record(record)

    asyncio.run(run())
    return summary


def _tally(summary: ScoreSummary, record: dict[str, Any]) -> None:
    summary.samples += 1
    summary.langs[record["lang"]] = summary.langs.get(record["lang"], 0) + 1
    if "error" in record:
        summary.failed += 1
        summary.failures.append((record["id"], record["error"]))
    for z in (record["z"], record.get("z_b", {})):
        summary.values += len(z)
        summary.unreadable += sum(v is None for v in z.values())


def failure_message(summary: ScoreSummary) -> str:
    first_id, first_reason = summary.failures[0]
    return (
        f"{summary.failed} of {summary.samples} samples could not be scored (first: "
        f"'{first_id}': {first_reason}); they are written with an 'error' field. Rerun the "
        "same command to retry them: answers already received are cached."
    )
