"""CE-Judge (checklist engineering): concepts, translated checklists, then the judgment."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ucsj.answers import final_choice, final_score
from ucsj.data import Sample
from ucsj.gen import clean_item, complete_lines
from ucsj.methods.base import Context, Judgement, both_orders, verdict_judgement
from ucsj.prompts import fence, numbered, pair_block, render, sample_values

CEJUDGE_IO_ITEMS, CEJUDGE_OI_ITEMS, CEJUDGE_CONCEPTS = 6, 3, 4


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
            render("cejudge_concepts", text=fence("data", text)), "ce-judge.concepts"
        )
        items = [clean_item(x) for x in complete_lines(reply)]
        return "\n".join(f"- {x}" for x in [i for i in items if i][:CEJUDGE_CONCEPTS]) or "- (none)"

    async def english(text: str) -> str:
        if sample.lang == "en":
            return text
        reply = await ctx.ask(
            render("cejudge_translate", text=fence("data", text)), "ce-judge.translate"
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
            "ce-judge.checklist",
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
            "ce-judge.judgment",
        )
        return Judgement(final_score(reply.text, low, high), None)
    reply = await ctx.ask(
        render("cejudge_judgment", checklist=checklist, **values),
        "ce-judge.judgment",
    )
    return verdict_judgement(reply)


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
            "ce-judge.judgment",
        )
        return final_choice(reply.text)

    return await both_orders(ctx, sample, choose)
