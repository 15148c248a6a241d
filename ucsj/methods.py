"""The judges UCS is compared with (UCS paper, section 4 "Baselines", 5.5 and A.6; CE-Judge).

Each method is one async function from a sample to a `Judgement`, using the same client,
cache, determinism and task fields as UCS. Prompts are the `judge_*`, `chateval_*`,
`rocketeval_*` and `cejudge_*` files in ucsj/prompts/.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ucsj.answers import (
    expected_score,
    final_choice,
    final_score,
    final_verdict,
    first_choice,
    numbered_answers,
    single_answer,
)
from ucsj.criteria import CriteriaSet
from ucsj.data import Sample, SampleFile
from ucsj.errors import InputError
from ucsj.gen import clean_item, complete_lines, parse_questions
from ucsj.io import dump_json_line, open_output
from ucsj.llm import ChatRequest, Completion, LLMClient, LLMSettings
from ucsj.llm.client import RequestFailed
from ucsj.prompts import fence, numbered, pair_block, render, sample_values
from ucsj.scores import ScoreRecord
from ucsj.shards import Shard
from ucsj.streaming import in_order
from ucsj.tasks import Task

REASONING_TOKENS = 512  # a verdict after step-by-step reasoning
ROCKETEVAL_ITEMS = 5
CEJUDGE_IO_ITEMS, CEJUDGE_OI_ITEMS, CEJUDGE_CONCEPTS = 6, 3, 4
CHATEVAL_ROUNDS = 2
CHATEVAL_TURN_TOKENS = 128


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


def _verdict_judgement(completion: Completion) -> Judgement:
    verdict = final_verdict(completion)
    prob = (
        verdict.prob
        if verdict.prob is not None
        else (None if verdict.pred is None else float(verdict.pred))
    )
    return Judgement(verdict.pred, prob)


# -- single-prompt judges (UCS paper, section 4) -----------------------------------------------


async def zero_shot(ctx: Context, sample: Sample) -> Judgement:
    """The task's question asked directly; the first word is the verdict. Pointwise: the
    score, read as the expected value over the answer token's alternatives. Pairwise: A or
    B, asked in both orders."""
    if ctx.task.kind == "pairwise":
        return await both_orders(ctx, sample, _zero_shot_choice)
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
        score = expected_score(await ctx.ask(prompt, 4), low, high)
        return Judgement(None if score is None else round(score, 6), None)
    p = single_answer(await ctx.ask(render("judge_zero_shot", **values), 4))
    return Judgement(None if p is None else int(p >= 0.5), p)


async def _zero_shot_choice(ctx: Context, sample: Sample, first: str, second: str) -> str | None:
    prompt = render(
        "judge_zero_shot_pairwise",
        question=ctx.task.question,
        pair=pair_block(ctx.task, sample, first, second),
    )
    return first_choice(await ctx.ask(prompt, 4))


ChooseFn = Callable[[Context, Sample, str, str], Awaitable[str | None]]


async def both_orders(ctx: Context, sample: Sample, choose: ChooseFn) -> Judgement:
    """A pairwise verdict as given and with the responses swapped; the swapped verdict is
    mapped back to the original positions (`pred_swapped`)."""
    first, second = sample.output, sample.output_b or ""
    forward, backward = await asyncio.gather(
        choose(ctx, sample, first, second), choose(ctx, sample, second, first)
    )
    return Judgement(forward, None, {"pred_swapped": SWAP.get(backward or "")})


async def cot(ctx: Context, sample: Sample) -> Judgement:
    """Step-by-step reasoning, then a verdict on a final line."""
    reply = await ctx.ask(
        render("judge_cot", **sample_values(ctx.task, sample)), REASONING_TOKENS, logprobs=False
    )
    return _verdict_judgement(reply)


async def guidelines(ctx: Context, sample: Sample) -> Judgement:
    """AG (paper A.6): the annotators' guidelines in the prompt, then a verdict line."""
    text = ctx.options.guidelines or ctx.task.guidelines
    if not text:
        raise InputError(f"task '{ctx.task.name}' has no guidelines: pass --guidelines FILE")
    reply = await ctx.ask(
        render("judge_guidelines", guidelines=text, **sample_values(ctx.task, sample)),
        REASONING_TOKENS,
        logprobs=False,
    )
    return _verdict_judgement(reply)


async def llm_aggregator(ctx: Context, sample: Sample) -> Judgement:
    """UCS-LLM (paper 5.5): the LLM turns the sample's criterion answers into a verdict."""
    scores, criteria = ctx.options.scores, ctx.options.criteria
    if scores is None or criteria is None:
        raise InputError("llm-aggregator needs --scores (from `ucsj score`) and --criteria")
    record = scores.get(sample.id)
    if record is None:
        raise InputError(f"sample '{sample.id}' is not in the --scores file")
    lines = []
    for question in criteria.questions:
        z = record.z.get(question.id)
        if z is None:
            answer = "unreadable"
        else:
            p_yes = 1.0 - z if question.yes_means == "bad" else z
            answer = f"{'Yes' if p_yes >= 0.5 else 'No'} ({p_yes:.2f})"
        note = " [Yes means bad]" if question.yes_means == "bad" else ""
        lines.append(f"- {question.text}{note} -> {answer}")
    reply = await ctx.ask(
        render("judge_aggregator", criteria="\n".join(lines), **sample_values(ctx.task, sample)),
        REASONING_TOKENS,
        logprobs=False,
    )
    return _verdict_judgement(reply)


# -- ChatEval: multi-agent debate (Chan et al.) --------------------------------------------------


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
            reply = await ctx.ask(prompt, CHATEVAL_TURN_TOKENS, system=system)
            discussion.append(f"{name}: {reply.text.strip()}")
            last[name] = _verdict_judgement(reply)
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


# -- checklist judges ----------------------------------------------------------------------------


async def rocketeval(ctx: Context, sample: Sample) -> Judgement:
    """RocketEval (Wei et al.): an instance checklist from the sample's input, each item graded
    in its own one-token call, P(yes)/(P(yes)+P(no)); score = mean, or a tree ensemble's
    probability with --calibrate-on."""
    values = sample_values(ctx.task, sample)
    given = sample.input if sample.input is not None else "\n\n".join(sample.source)
    reply = await ctx.ask(
        render(
            "rocketeval_checklist", n=str(ROCKETEVAL_ITEMS), input=fence("input", given), **values
        ),
        256,
        logprobs=False,
    )
    items = parse_questions(complete_lines(reply), ROCKETEVAL_ITEMS)
    if not items:
        return Judgement(None, None, {"items": []})
    graded = await asyncio.gather(
        *(ctx.ask(render("score_criterion", **{**values, "question": item}), 1) for item in items)
    )
    scores = [single_answer(g) for g in graded]
    if ctx.options.calibrator is not None:
        prob = float(ctx.options.calibrator.predict_proba([item_features(scores)])[0, 1])
        return Judgement(int(prob >= 0.5), prob, {"items": scores})
    return _threshold(ctx, scores, {"items": scores})


async def checkeval(ctx: Context, sample: Sample) -> Judgement:
    """CheckEval (Lee et al.): one fixed checklist per aspect, one call per aspect answered as
    `Q1: Yes` lines; score = the proportion of yes."""
    if not ctx.task.checkeval:
        raise InputError(f"task '{ctx.task.name}' has no [checkeval] checklist")
    values = sample_values(ctx.task, sample)
    replies = await asyncio.gather(
        *(
            ctx.ask(
                render("score_questions", questions=numbered(list(qs)), **values), 8 * len(qs) + 16
            )
            for _, qs in ctx.task.checkeval
        )
    )
    answers: list[float | None] = []
    for (_, qs), reply in zip(ctx.task.checkeval, replies, strict=True):
        answers += [
            None if v is None else float(v >= 0.5) for v in numbered_answers(reply, len(qs))
        ]
    return _threshold(ctx, answers, {"items": answers})


def _threshold(ctx: Context, values: list[float | None], extra: dict[str, Any]) -> Judgement:
    readable = [v for v in values if v is not None]
    if not readable:
        return Judgement(None, None, extra)
    score = float(np.mean(readable))
    return Judgement(int(score >= ctx.options.threshold), score, extra)


def item_features(scores: list[float | None]) -> list[float]:
    """RocketEval item scores in checklist order, unreadable or missing items at 0.5."""
    padded = [0.5 if s is None else s for s in scores[:ROCKETEVAL_ITEMS]]
    return padded + [0.5] * (ROCKETEVAL_ITEMS - len(padded))


def fit_rocketeval_calibrator(rows: list[dict[str, Any]]) -> Any:
    """RocketEval's supervised reweighting: a small tree ensemble on labelled item scores."""
    from sklearn.ensemble import RandomForestClassifier

    usable = [r for r in rows if r.get("label") is not None and r.get("items") is not None]
    labels = [r["label"] for r in usable]
    if len(set(labels)) < 2:
        raise InputError("--calibrate-on needs labelled samples of both classes")
    model = RandomForestClassifier(
        n_estimators=100, max_depth=3, class_weight="balanced", random_state=42
    )
    return model.fit([item_features(r["items"]) for r in usable], labels)


# -- CE-Judge (checklist engineering) -------------------------------------------------------------


async def ce_checklist(ctx: Context, sample: Sample) -> list[str]:
    """CE-Judge's steps 1 and 2 for `sample.output`: concepts of the input and of the output
    (1-4, English); both translated to English; an output-to-input checklist (1-3 items,
    translated output + input concepts) and an input-to-output one (1-6 items, translated
    input + output concepts), concatenated."""
    values = sample_values(ctx.task, sample)
    given = sample.input if sample.input is not None else "\n\n".join(sample.source)
    input_name = ctx.task.input_name if sample.input is not None else ctx.task.source_name
    output_name = ctx.task.output_name

    async def concepts(text: str) -> str:
        reply = await ctx.ask(
            render("cejudge_concepts", text=fence("data", text)), 128, logprobs=False
        )
        items = [clean_item(x) for x in complete_lines(reply)]
        return "\n".join(f"- {x}" for x in [i for i in items if i][:CEJUDGE_CONCEPTS]) or "- (none)"

    async def english(text: str) -> str:
        if sample.lang == "en":
            return text
        reply = await ctx.ask(
            render("cejudge_translate", text=fence("data", text)), 512, logprobs=False
        )
        return reply.text.strip() or text

    in_concepts, out_concepts, in_en, out_en = await asyncio.gather(
        concepts(given), concepts(sample.output), english(given), english(sample.output)
    )

    async def checklist(side: str, text: str, other: str, other_concepts: str, n: int) -> list[str]:
        reply = await ctx.ask(
            render(
                "cejudge_checklist",
                side_name=side,
                text=fence("data", text),
                other_name=other,
                concepts=other_concepts,
                n=str(n),
                **values,
            ),
            400,
            logprobs=False,
        )
        return [x for x in map(clean_item, complete_lines(reply)) if len(x) > 3][:n]

    out_to_in, in_to_out = await asyncio.gather(
        checklist(output_name, out_en, input_name, in_concepts, CEJUDGE_OI_ITEMS),
        checklist(input_name, in_en, output_name, out_concepts, CEJUDGE_IO_ITEMS),
    )
    return out_to_in + in_to_out


async def ce_judge(ctx: Context, sample: Sample) -> Judgement:
    """CE-Judge: the checklist, then the judgment on the untranslated texts. Binary tasks end
    with a verdict line, pointwise ones with `Score: X` on the task's scale after a scoring
    guide, pairwise ones with `Verdict: A` or `B`, asked in both orders."""
    if ctx.task.kind == "pairwise":
        return await _ce_judge_pair(ctx, sample)
    checklist = numbered(await ce_checklist(ctx, sample)) or "(empty)"
    values = sample_values(ctx.task, sample)
    if ctx.task.kind == "pointwise":
        low, high = ctx.task.scale
        reply = await ctx.ask(
            render(
                "cejudge_judgment_pointwise",
                checklist=checklist,
                guide=ctx.task.guide(),
                low=str(low),
                high=str(high),
                **values,
            ),
            REASONING_TOKENS,
            logprobs=False,
        )
        return Judgement(final_score(reply.text, low, high), None)
    reply = await ctx.ask(
        render("cejudge_judgment", checklist=checklist, **values),
        REASONING_TOKENS,
        logprobs=False,
    )
    return _verdict_judgement(reply)


async def _ce_judge_pair(ctx: Context, sample: Sample) -> Judgement:
    """Each response gets its own checklist, built once and shown in both orders; the pair is
    judged as given and swapped."""
    first, second = sample.output, sample.output_b or ""
    lists = await asyncio.gather(
        ce_checklist(ctx, replace(sample, output=first)),
        ce_checklist(ctx, replace(sample, output=second)),
    )
    checklists = {
        text: numbered(items) or "(empty)"
        for text, items in zip((first, second), lists, strict=True)
    }

    async def choose(ctx: Context, sample: Sample, a: str, b: str) -> str | None:
        reply = await ctx.ask(
            render(
                "cejudge_judgment_pairwise",
                question=ctx.task.question,
                pair=pair_block(ctx.task, sample, a, b),
                checklist_a=checklists[a],
                checklist_b=checklists[b],
            ),
            REASONING_TOKENS,
            logprobs=False,
        )
        return final_choice(reply.text)

    return await both_orders(ctx, sample, choose)


SWAP = {"a": "b", "b": "a"}


MethodFn = Callable[[Context, Sample], Awaitable[Judgement]]
METHODS: dict[str, MethodFn] = {
    "zero-shot": zero_shot,
    "cot": cot,
    "guidelines": guidelines,
    "llm-aggregator": llm_aggregator,
    "chateval": chateval,
    "rocketeval": rocketeval,
    "checkeval": checkeval,
    "ce-judge": ce_judge,
}
THRESHOLD_METHODS = ("rocketeval", "checkeval")
# Task kinds each method judges; the others ask a yes/no question.
METHOD_KINDS = {name: ("binary",) for name in METHODS} | {
    "zero-shot": ("binary", "pointwise", "pairwise"),
    "ce-judge": ("binary", "pointwise", "pairwise"),
}


def check_method(method: str, task: Task) -> None:
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}")
    if task.kind not in METHOD_KINDS[method]:
        able = [m for m, kinds in METHOD_KINDS.items() if task.kind in kinds]
        raise InputError(
            f"task '{task.name}' is {task.kind}: {method} judges binary tasks only; "
            f"for {task.kind} tasks use {', '.join(able)} (or UCS: score, fit, predict)"
        )


# -- running a method over a data file -----------------------------------------------------------


async def judge_sample(ctx: Context, method: str, sample: Sample) -> dict[str, Any]:
    kind = ctx.task.kind
    row: dict[str, Any] = {
        "id": sample.id,
        "lang": sample.lang,
        **sample.gold(kind),
        **dict(sample.groups),
        "method": method,
    }
    # binary rows carry P(pass); pairwise rows the verdict of the swapped order as well
    empty = {"binary": {"prob": None}, "pairwise": {"pred_swapped": None}}.get(kind, {})
    try:
        judgement = await METHODS[method](ctx, sample)
    except RequestFailed as exc:
        return {**row, **empty, "pred": None, "unreadable": 1.0, "error": str(exc)}
    if kind == "binary":
        row["prob"] = None if judgement.prob is None else round(judgement.prob, 6)
    row["pred"] = judgement.pred
    if kind == "pairwise":
        row["pred_swapped"] = judgement.extra["pred_swapped"]
    verdicts = [row["pred"], row.get("pred_swapped", row["pred"])]
    row["unreadable"] = sum(v is None for v in verdicts) / 2
    for key, value in judgement.extra.items():
        if key != "pred_swapped":
            row[key] = _rounded(value)
    return row


def _rounded(values: list[float | None]) -> list[float | None]:
    return [None if v is None else round(v, 6) for v in values]


@dataclass
class JudgeSummary:
    samples: int = 0
    failed: int = 0
    no_verdict: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)

    def add(self, row: dict[str, Any]) -> None:
        self.samples += 1
        if "error" in row:
            self.failed += 1
            self.failures.append((row["id"], row["error"]))
        elif row["unreadable"]:  # pairwise: either order without a verdict
            self.no_verdict += 1


def _run(
    data: str | Path,
    task: Task,
    method: str,
    settings: LLMSettings,
    options: JudgeOptions,
    lang: str | None,
    sink: Callable[[dict[str, Any]], None],
    on_validated: Callable[[int], None] | None = None,
    shard: Shard | None = None,
) -> None:
    """Judge every sample of `data` (of `shard`, when given) in input order, handing each row
    to `sink`."""
    check_method(method, task)
    samples = SampleFile(data, task, lang)
    count = samples.validate().count
    if on_validated is not None:
        on_validated(count)

    async def run() -> None:
        async with LLMClient(settings) as client:
            ctx = Context(client, task, options)
            window = max(4, settings.concurrency * 2)
            chosen = (s for s in samples if shard is None or shard.takes(s.id))
            async for row in in_order(chosen, lambda s: judge_sample(ctx, method, s), window):
                sink(row)

    asyncio.run(run())


def judge_file(
    data: str | Path,
    task: Task,
    method: str,
    settings: LLMSettings,
    options: JudgeOptions,
    output: str | Path,
    *,
    lang: str | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    on_validated: Callable[[int], None] | None = None,
    shard: Shard | None = None,
) -> JudgeSummary:
    """Write every sample's prediction to `output` (JSONL, input order, atomically)."""
    summary = JudgeSummary()
    with open_output(output, hold=settings.pending is not None) as out:

        def sink(row: dict[str, Any]) -> None:
            out.write(dump_json_line(row))
            summary.add(row)
            if on_row is not None:
                on_row(row)

        _run(data, task, method, settings, options, lang, sink, on_validated, shard)
    return summary


def judge_rows(
    data: str | Path,
    task: Task,
    method: str,
    settings: LLMSettings,
    options: JudgeOptions,
    *,
    lang: str | None = None,
) -> list[dict[str, Any]]:
    """Every sample's prediction row in memory (for calibration sets, which are small)."""
    rows: list[dict[str, Any]] = []
    _run(data, task, method, settings, options, lang, rows.append)
    return rows
