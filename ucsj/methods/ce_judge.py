"""CE-Judge (checklist engineering; mghiasvand1/CE-Judge): concepts, checklists built on
English translations, then the judgment on the original texts.

As the reference runs it: the key concepts of the input and of the output (in English, from
the original texts); each text translated to English from its own language (a LitEval de-en
source from German, its translation not at all); an output-to-input checklist (the translated
output + the input's concepts) and an input-to-output one (the translated input + the
output's concepts); the judgment with both checklists. The reference bounds the counts in the
pairwise setting only (1-4 concepts, 1-3 and 1-6 items); pointwise (and ucsj's binary
setting, a single output judged against its source like the pointwise one) leaves them to
the model. Every call is capped at the reference's 8192 tokens; translation goes in chunks of
whole sentences so nothing is cut.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

from ucsj.answers import final_choice, final_score
from ucsj.data import Sample
from ucsj.gen import clean_item, complete_lines
from ucsj.methods.base import Context, Judgement, both_orders, verdict_judgement
from ucsj.prompts import fence, numbered, pair_block, render, sample_values

# (concepts, output-to-input items, input-to-output items) per task kind; None: unbounded
BOUNDS: dict[str, tuple[int, int, int] | None] = {
    "pairwise": (4, 3, 6),
    "pointwise": None,
    "binary": None,
}
TRANSLATE_CHUNK = 2000  # characters of whole sentences per translation call
_SENTENCE = re.compile(r"[^.!?。！？؟।\n]*(?:[.!?。！？؟।]+[\"'”’»)\]]*|\n|$)\s*")


def sentence_chunks(text: str, limit: int = TRANSLATE_CHUNK) -> list[str]:
    """`text` cut into chunks of whole sentences, each at most `limit` characters unless one
    sentence alone is longer; joined back they give `text` exactly."""
    chunks: list[str] = []
    current = ""
    for sentence in (m.group(0) for m in _SENTENCE.finditer(text) if m.group(0)):
        if current and len(current) + len(sentence) > limit:
            chunks.append(current)
            current = ""
        current += sentence
    if current:
        chunks.append(current)
    return chunks


def _limit(bound: int | None, what: str) -> str:
    return "" if bound is None else f" Write between 1 and {bound} {what}."


async def _english(ctx: Context, text: str, lang: str) -> str:
    if lang == "en":
        return text
    chunks = sentence_chunks(text)
    replies = await asyncio.gather(
        *(
            ctx.ask(render("cejudge_translate", text=fence("data", c)), "ce-judge.translate")
            for c in chunks
        )
    )
    parts = [r.text.strip() or c.strip() for r, c in zip(replies, chunks, strict=True)]
    glue = ["\n" if c.rstrip(" \t").endswith("\n") else " " for c in chunks]
    return "".join(p + g for p, g in zip(parts, glue, strict=True)).strip()


async def _concepts(ctx: Context, text: str, bound: int | None) -> str:
    reply = await ctx.ask(
        render("cejudge_concepts", text=fence("data", text), limit=_limit(bound, "concepts")),
        "ce-judge.concepts",
    )
    items = [x for x in map(clean_item, complete_lines(reply)) if x]
    return "\n".join(f"- {x}" for x in items[:bound]) or "- (none)"


async def ce_checklist(ctx: Context, sample: Sample) -> list[str]:
    """CE-Judge's steps 1 and 2 for `sample.output`: the output-to-input checklist, then the
    input-to-output one."""
    values = sample_values(ctx.task, sample)
    bounds = BOUNDS[ctx.task.kind]
    n_concepts, n_out_in, n_in_out = bounds if bounds else (None, None, None)
    if sample.input is not None:
        given, given_lang, input_name = sample.input, sample.lang, ctx.task.input_name
    else:
        given = "\n\n".join(sample.source)
        given_lang, input_name = sample.source_language, ctx.task.source_name
    output_name = ctx.task.output_name
    in_concepts, out_concepts, in_en, out_en = await asyncio.gather(
        _concepts(ctx, given, n_concepts),
        _concepts(ctx, sample.output, n_concepts),
        _english(ctx, given, given_lang),
        _english(ctx, sample.output, sample.lang),
    )

    async def checklist(
        side: str, text: str, other: str, other_concepts: str, n: int | None
    ) -> list[str]:
        reply = await ctx.ask(
            render(
                "cejudge_checklist",
                side_name=side,
                text=fence("data", text),
                other_name=other,
                concepts=other_concepts,
                limit=_limit(n, "items"),
                **values,
            ),
            "ce-judge.checklist",
        )
        return [x for x in map(clean_item, complete_lines(reply)) if len(x) > 3][:n]

    out_to_in, in_to_out = await asyncio.gather(
        checklist(output_name, out_en, input_name, in_concepts, n_out_in),
        checklist(input_name, in_en, output_name, out_concepts, n_in_out),
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
            "ce-judge.judgment",
        )
        return Judgement(final_score(reply.text, low, high), None)
    reply = await ctx.ask(
        render("cejudge_judgment", checklist=checklist, **values), "ce-judge.judgment"
    )
    return verdict_judgement(reply)


async def _ce_judge_pair(ctx: Context, sample: Sample) -> Judgement:
    """Each response gets its own checklist, built once and shown in both orders; the pair is
    judged as given and swapped (the reference shows the chosen response first only: the
    report gives that protocol's accuracy too)."""
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
            "ce-judge.judgment",
        )
        return final_choice(reply.text)

    return await both_orders(ctx, sample, choose)
