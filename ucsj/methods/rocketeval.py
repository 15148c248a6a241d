"""RocketEval (Wei et al., ICLR 2025; Joinn99/RocketEval-ICLR): a checklist per query,
graded item by item by a one-token answer.

As the reference runs it:
- one checklist per distinct input (here the source and input every sample of it shares,
  e.g. all sentences of one RAG answer), written once from the input alone, with as many
  items as the model writes;
- each item graded in its own call (max_tokens 1, top-5 logprobs), the item's score the
  normalized P(yes) / (P(yes) + P(no));
- per-query reweighting where labels exist: for a query with labelled responses (from
  --calibrate-on data that shares the input), an extra-trees regressor (10 trees, depth 2)
  on the item scores, blended with the mean by how evenly the labels spread (the reference's
  KL-to-uniform weight); everywhere else the unweighted mean of the item scores.
The sample passes when its score reaches the threshold (calibration.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ucsj.answers import single_answer
from ucsj.data import Sample
from ucsj.gen import complete_lines, parse_questions
from ucsj.methods.base import Context, Judgement
from ucsj.prompts import material_block, render, sample_values

MAX_ITEMS = 100  # the reference takes every item the model writes; this only bounds garbage


def input_key(sample: Sample) -> str:
    """Which query a sample answers: its source and input, whatever its output."""
    text = json.dumps([list(sample.source), sample.input], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def rocketeval(ctx: Context, sample: Sample) -> Judgement:
    """The input's shared checklist, each item graded; the mean item score (or the query's
    reweighted score) against the threshold."""
    key = input_key(sample)
    items = await ctx.once(("rocketeval", key), lambda: _checklist(ctx, sample))
    extra: dict[str, Any] = {"input_key": key, "checklist": items, "items": []}
    if not items:
        return Judgement(None, None, extra)
    values = sample_values(ctx.task, sample)
    graded = await asyncio.gather(
        *(ctx.ask(render("rocketeval_grade", item=q, **values), "rocketeval.grade") for q in items)
    )
    scores = [single_answer(g) for g in graded]
    extra["items"] = scores
    if all(s is None for s in scores):
        return Judgement(None, None, extra)
    reweight = (ctx.options.reweighting or {}).get(key)
    score = reweight.score(scores) if reweight is not None else mean_score(scores)
    extra["reweighted"] = reweight is not None
    return Judgement(int(score >= ctx.options.threshold), score, extra)


async def _checklist(ctx: Context, sample: Sample) -> list[str]:
    prompt = render(
        "rocketeval_create",
        material=material_block(ctx.task, sample),
        description=ctx.task.description.strip(),
        output_name=ctx.task.output_name.lower(),
    )
    reply = await ctx.ask(prompt, "rocketeval.checklist")
    return parse_questions(complete_lines(reply), MAX_ITEMS)


def mean_score(scores: list[float | None]) -> float:
    """The unweighted mean of the readable item scores."""
    return float(np.mean([s for s in scores if s is not None]))


@dataclass
class QueryReweighting:
    """One query's learned item weights: the regressor and how much to trust it."""

    model: Any
    weight: float  # 0: the plain mean, 1: the regressor alone

    def score(self, scores: list[float | None]) -> float:
        learned = float(self.model.predict([_features(scores)])[0])
        return self.weight * learned + (1 - self.weight) * mean_score(scores)


def _features(scores: list[float | None]) -> list[float]:
    # an unreadable item counts as undecided (0.5): the regressor takes no missing values
    return [0.5 if s is None else s for s in scores]


def label_spread_weight(labels: list[int], classes: int = 2) -> float:
    """The reference's KL-to-uniform weight: 1 when the labels are spread evenly over the
    classes, 0 when they are all one class (nothing to learn from)."""
    counts = np.bincount(np.asarray(labels, dtype=int), minlength=classes)[:classes]
    hist, uniform = counts / counts.sum(), np.full(classes, 1 / classes)
    worst = _kl(np.eye(classes)[0], uniform)
    return float((worst - _kl(hist, uniform)) / worst)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    nonzero = p > 0
    return float(np.sum(p[nonzero] * np.log(p[nonzero] / q[nonzero])))


def fit_reweighting(rows: list[dict[str, Any]]) -> dict[str, QueryReweighting]:
    """Per query (`input_key`), a regressor from item scores to the label, fitted on the
    labelled rocketeval rows of that query (the reference's 10 trees of depth 2)."""
    from sklearn.ensemble import ExtraTreesRegressor

    by_query: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("label") is not None and row.get("items") and row.get("input_key"):
            by_query.setdefault(row["input_key"], []).append(row)
    fitted = {}
    for key, members in by_query.items():
        width = len(members[0]["items"])
        usable = [r for r in members if len(r["items"]) == width]
        labels = [int(r["label"]) for r in usable]
        model = ExtraTreesRegressor(n_estimators=10, max_depth=2, random_state=42)
        model.fit([_features(r["items"]) for r in usable], labels)
        fitted[key] = QueryReweighting(model, label_spread_weight(labels))
    return fitted
