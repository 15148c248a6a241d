"""Stage 2: every sample answers every criterion question; the answers form z(x) and s(x).

Granularities (DESIGN.md, "Criterion responses"): `per-concept` (one call per concept, the
default), `joint` (one call for all questions) and `per-criterion` (one call per question,
max_tokens 1, P(yes) from top_logprobs).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ucsj.answers import numbered_answers, single_answer
from ucsj.criteria import CriteriaSet, Question
from ucsj.data import Sample, SampleFile
from ucsj.errors import BackendError, CacheMissError
from ucsj.io import dump_json_line, open_output, refuse_overwriting_inputs
from ucsj.llm import CacheMode, ChatRequest, Completion, LLMClient, LLMSettings
from ucsj.llm.client import RequestFailed
from ucsj.llm.record_memo import RecordMemo, code_digest, memo_key
from ucsj.llm.request import canonical_json
from ucsj.prompts import numbered, render, sample_values
from ucsj.shards import Shard
from ucsj.streaming import Done, batched, in_order
from ucsj.tasks import Task

log = logging.getLogger("ucsj.scoring")

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
    for i, result in zip(
        missing, await _fetch_all(client, [calls[i] for i in missing]), strict=True
    ):
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
        if isinstance(result, CacheMissError):  # replay: stop, naming what is missing
            raise CacheMissError(
                f"sample '{sample.id}' (line {sample.line}), {_call_label(criteria, call)}: "
                f"{result}"
            ) from None
        if isinstance(result, BaseException):
            raise result  # a bug, an unreachable endpoint, a broken cache: stop the run
        scored.answers[call.name] = result.text
        for key in ("prompt_tokens", "completion_tokens"):
            scored.usage[key] += result.usage.get(key, 0)
        for question, value in zip(call.questions, call_values(call, result), strict=True):
            scored.z[question.id] = None if value is None else round(value, 6)
    return scored


def _call_label(criteria: CriteriaSet, call: Call) -> str:
    """What a call asks, for messages: the concept or question, by id and name."""
    for concept in criteria.concepts:
        if concept.id == call.name:
            return f"concept {concept.id} ({concept.name})"
    if call.name == "all":
        return "the call for all questions"
    return f"question {call.name}"


async def _fetch_all(client: LLMClient, calls: list[Call]) -> list[Any]:
    """Each call's completion or exception; a single call is awaited without a task."""
    if len(calls) == 1:
        try:
            return [await client.complete(calls[0].request, allow_truncated=True)]
        except Exception as exc:  # the same contract as gather(return_exceptions=True)
            return [exc]
    return await asyncio.gather(
        *(client.complete(call.request, allow_truncated=True) for call in calls),
        return_exceptions=True,
    )


async def score_sample(
    client: LLMClient, task: Task, criteria: CriteriaSet, sample: Sample, scoring: str
) -> dict[str, Any]:
    """The scores record of one sample. A pairwise sample's responses are scored each on its
    own, the second into `z_b`, `s_b`, `answers_b` and `keys_b`."""
    if task.kind == "pairwise" and sample.output_b is not None:
        results = await asyncio.gather(
            score_output(client, task, criteria, sample, scoring),
            score_output(client, task, criteria, replace(sample, output=sample.output_b), scoring),
        )
        scored = {"": results[0], "_b": results[1]}
    else:
        scored = {"": await score_output(client, task, criteria, sample, scoring)}
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


MEMO_BATCH = 256  # input lines looked up in the record memo at once


@dataclass(frozen=True)
class ScoredLine:
    """One output line and what the run's summary counts from it."""

    line: str
    lang: str
    values: int
    unreadable: int
    failure: tuple[str, str] | None = None  # (sample id, reason)
    cache_keys: tuple[str, ...] = ()  # the responses the line was computed from

    @classmethod
    def of(cls, record: dict[str, Any]) -> ScoredLine:
        zs = [record["z"], record.get("z_b", {})]
        error = record.get("error")
        keys = [*record["keys"].values(), *record.get("keys_b", {}).values()]
        return cls(
            dump_json_line(record),
            record["lang"],
            sum(len(z) for z in zs),
            sum(v is None for z in zs for v in z.values()),
            None if error is None else (record["id"], error),
            tuple(keys),
        )

    def to_memo(self) -> str:
        """The memo value: a digest, then what the summary counts, the cache keys and the line."""
        body = (
            f"{self.lang}\t{self.values}\t{self.unreadable}\t{','.join(self.cache_keys)}\t"
            f"{self.line}"
        )
        return f"{_memo_digest(body)}\t{body}"

    @classmethod
    def from_memo(cls, text: str) -> ScoredLine | None:
        """The line a memo value holds; None when it fails its digest or cannot be parsed
        (the line is then computed again)."""
        fields = text.split("\t", 5)  # one split: this runs for every line of a rerun
        if len(fields) != 6:
            return None
        digest, lang, values, unreadable, keys, line = fields
        if digest != _memo_digest(text[len(digest) + 1 :]):
            return None
        try:
            cache_keys = tuple(keys.split(",")) if keys else ()
            return cls(line, lang, int(values), int(unreadable), None, cache_keys)
        except ValueError:
            return None


def _memo_digest(body: str) -> str:
    # SHA-256 runs in hardware on current CPUs: faster here than blake2b, and no weaker.
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def score_file(
    data: str | Path,
    criteria: CriteriaSet,
    task: Task,
    output: str | Path,
    settings: LLMSettings,
    *,
    lang: str | None = None,
    scoring: str = "per-concept",
    on_record: Callable[[], None] | None = None,
    on_validated: Callable[[int], None] | None = None,
    shard: Shard | None = None,
) -> ScoreSummary:
    """Score every sample of `data` into `output` (JSONL, input order, written atomically);
    with `shard`, only the samples whose id falls in it.

    The whole file is validated before the first request. Samples whose requests failed are
    written with an `error` and counted; their successful calls are cached for the rerun.
    Lines of a rerun come from the record memo beside the cache (ucsj/llm/record_memo.py).
    """
    if scoring not in SCORINGS:
        raise ValueError(f"unknown scoring granularity {scoring!r}")
    refuse_overwriting_inputs([output], [data])
    samples = SampleFile(data, task, lang)
    count = samples.validate().count
    if on_validated is not None:
        on_validated(count)
    summary = ScoreSummary()
    context = memo_context(task, criteria, scoring, settings.model, lang)

    async def run() -> None:
        # the client closes inside the output: a collect run that ends with requests pending
        # raises there, and no output is written
        collecting = CacheMode(settings.cache_mode) is CacheMode.COLLECT
        client = LLMClient(settings)  # refuses a replay without a cache before the memo opens
        try:
            with open_output(output, hold=collecting) as out, _memo_for(settings) as memo:
                async with client:
                    lines = score_lines(
                        client, task, criteria, samples, scoring, memo, context, shard
                    )
                    async for scored in lines:
                        out.write(scored.line)
                        _tally(summary, scored)
                        if on_record is not None:
                            on_record()
        finally:
            await client.aclose()

    try:
        asyncio.run(run())
    except CacheMissError as exc:  # name the data file, as judge does
        raise CacheMissError(f"{data}: {exc}") from None
    return summary


async def score_lines(
    client: LLMClient,
    task: Task,
    criteria: CriteriaSet,
    samples: SampleFile,
    scoring: str,
    memo: RecordMemo | None,
    context: bytes,
    shard: Shard | None = None,
) -> AsyncIterator[ScoredLine]:
    """Every sample's line in input order: from the memo when it holds it, else scored and
    memoised (unless a request failed)."""
    fresh: list[tuple[bytes, str]] = []
    raw_lines = samples.raw_lines()
    if shard is not None:
        raw_lines = (
            (number, text)
            for number, text in raw_lines
            if shard.takes(samples.parse(number, text).id)
        )

    def items() -> Iterator[Any]:
        if memo is None:  # --cache off or a refresh: nothing to look up or key
            yield from ((b"", samples.parse(number, text)) for number, text in raw_lines)
            return
        for chunk in batched(raw_lines, MEMO_BATCH):
            keys = [memo_key(context, text) for _, text in chunk]
            hits = usable_memo_lines(client, memo.get_many(keys))
            for (number, text), key in zip(chunk, keys, strict=True):
                hit = hits.get(key)
                yield Done(hit) if hit else (key, samples.parse(number, text))
            memo.put_many(fresh)
            fresh.clear()

    async def work(item: tuple[bytes, Sample]) -> ScoredLine:
        key, sample = item
        scored = ScoredLine.of(await score_sample(client, task, criteria, sample, scoring))
        if memo is not None and scored.failure is None:
            fresh.append((key, scored.to_memo()))
        return scored

    window = max(4, client.settings.concurrency * 2)
    async for scored in in_order(items(), work, window):
        yield scored
    if memo is not None:
        memo.put_many(fresh)


def usable_memo_lines(client: LLMClient, values: dict[bytes, str]) -> dict[bytes, ScoredLine]:
    """The memo values' lines that pass their digest and whose responses are all still in the
    cache (a memo that outlived its cache must not answer a replay alone)."""
    lines = {}
    for key, value in values.items():
        scored = ScoredLine.from_memo(value)
        if scored is not None:
            lines[key] = scored
    if len(lines) < len(values):
        log.warning(
            "%d record memo lines fail their check; computing them again", len(values) - len(lines)
        )
    if client.cache is None:
        return {}
    wanted = {k for scored in lines.values() for k in scored.cache_keys}
    # One count answers the usual rerun; only when a key is missing is each one looked up.
    if not client.cache.holds_all(wanted):
        present = client.cache.present(wanted)
        lines = {key: s for key, s in lines.items() if present.issuperset(s.cache_keys)}
    return {key: scored for key, scored in lines.items() if scored.cache_keys}


def memo_context(
    task: Task, criteria: CriteriaSet, scoring: str, model: str, lang: str | None
) -> bytes:
    """What a scores line depends on besides its input line and the cached responses."""
    material = {
        "code": code_digest().hex(),
        "task": repr(task),
        "criteria": criteria.to_json(),
        "scoring": scoring,
        "model": model,
        "lang": lang,
    }
    return hashlib.sha256(canonical_json(material).encode("utf-8")).digest()


@contextlib.contextmanager
def _memo_for(settings: LLMSettings) -> Iterator[RecordMemo | None]:
    """The memo of the cache directory; none with --cache off. A refresh run empties it before
    and after (the responses it records may differ) and neither reads nor fills it."""
    mode = CacheMode(settings.cache_mode)
    if mode is CacheMode.OFF:
        yield None
        return
    try:
        memo = RecordMemo(settings.cache_dir)
    except sqlite3.Error as exc:
        if mode is CacheMode.REFRESH:  # a memo that cannot be emptied could serve stale lines
            raise BackendError(
                f"cannot empty the record memo in {settings.cache_dir}: {exc}"
            ) from None
        log.warning("record memo unusable (%s); computing every line", exc)
        yield None
        return
    with memo:
        if mode is CacheMode.REFRESH:
            memo.invalidate()
            yield None
            memo.invalidate()
        else:
            yield memo


def _tally(summary: ScoreSummary, scored: ScoredLine) -> None:
    summary.samples += 1
    summary.langs[scored.lang] = summary.langs.get(scored.lang, 0) + 1
    if scored.failure is not None:
        summary.failed += 1
        summary.failures.append(scored.failure)
    summary.values += scored.values
    summary.unreadable += scored.unreadable


UNREADABLE_WARNING = 0.2  # above this share of unreadable answers, `score` warns


def unreadable_problem(summary: ScoreSummary, scoring: str) -> tuple[bool, str] | None:
    """(fatal, message) when too many answers could not be read, else None. None readable at
    all means the model answers in another format: nothing could be learned or judged from
    the scores, so it is an error, not a run with imputed 0.5s everywhere."""
    if not summary.values or summary.unreadable / summary.values <= UNREADABLE_WARNING:
        return None
    hint = (
        "; models that ignore answer formats often still answer one question at a time: try "
        "--scoring per-criterion"
        if scoring != "per-criterion"
        else "; check that the model follows instructions (see the raw `answers` in the output)"
    )
    if summary.unreadable == summary.values:
        return True, (
            f"none of the {summary.values} answers could be read (the model answers in "
            f"another format than 'Q1: Yes'){hint}"
        )
    share = summary.unreadable / summary.values
    return False, (
        f"{share:.0%} of the answers ({summary.unreadable} of {summary.values}) could not be "
        f"read and are imputed as 0.5{hint}"
    )


def failure_message(summary: ScoreSummary, cache_mode: CacheMode) -> str:
    first_id, first_reason = summary.failures[0]
    return (
        f"{summary.failed} of {summary.samples} samples could not be scored (first: "
        f"'{first_id}': {first_reason}); they are written with an 'error' field. "
        + _retry_advice(CacheMode(cache_mode))
    )


def _retry_advice(cache_mode: CacheMode) -> str:
    """How to retry failed samples, true for the cache mode the run used."""
    if cache_mode.writes:
        return "Rerun the same command to retry them: answers already received are cached."
    if cache_mode is CacheMode.OFF:
        return (
            "Rerun the same command to retry them; with --cache off nothing was cached, so "
            "every request is sent again."
        )
    return (
        f"With --cache {cache_mode.value} no request is sent: rerun with --cache readwrite to "
        "ask for the missing answers."
    )
