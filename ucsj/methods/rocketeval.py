"""RocketEval (Wei et al., ICLR 2025): an instance checklist graded item by item."""

from __future__ import annotations

import asyncio
from typing import Any

from ucsj.answers import single_answer
from ucsj.data import Sample
from ucsj.errors import InputError
from ucsj.gen import complete_lines, parse_questions
from ucsj.methods.base import Context, Judgement, threshold_judgement
from ucsj.prompts import fence, render, sample_values

ROCKETEVAL_ITEMS = 5


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
        "rocketeval.checklist",
    )
    items = parse_questions(complete_lines(reply), ROCKETEVAL_ITEMS)
    if not items:
        return Judgement(None, None, {"items": []})
    graded = await asyncio.gather(
        *(
            ctx.ask(render("score_criterion", **{**values, "question": item}), "rocketeval.grade")
            for item in items
        )
    )
    scores = [single_answer(g) for g in graded]
    if ctx.options.calibrator is not None:
        prob = float(ctx.options.calibrator.predict_proba([item_features(scores)])[0, 1])
        return Judgement(int(prob >= 0.5), prob, {"items": scores})
    return threshold_judgement(ctx, scores, {"items": scores})


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
