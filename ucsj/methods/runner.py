"""Running a method over a data file: one prediction row per sample, in input order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ucsj.data import Sample, SampleFile
from ucsj.errors import CacheMissError
from ucsj.io import dump_json_line, open_output
from ucsj.llm import LLMClient, LLMSettings
from ucsj.llm.client import RequestFailed
from ucsj.methods.base import Context, JudgeOptions
from ucsj.methods.registry import METHODS, check_method
from ucsj.shards import Shard
from ucsj.streaming import in_order
from ucsj.tasks import Task


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
    own = ctx.for_sample()
    try:
        judgement = await METHODS[method](own, sample)
    except CacheMissError as exc:  # replay: stop, naming what is missing, as `score` does
        raise CacheMissError(
            f"sample '{sample.id}' (line {sample.line}), method {method}, {exc}"
        ) from None
    except RequestFailed as exc:
        return {
            **row,
            **empty,
            "pred": None,
            "unreadable": 1.0,
            "cut_off": len(own.cut_off),
            "error": str(exc),
        }
    if kind == "binary":
        row["prob"] = None if judgement.prob is None else round(judgement.prob, 6)
    row["pred"] = judgement.pred
    if kind == "pairwise":
        row["pred_swapped"] = judgement.extra["pred_swapped"]
    verdicts = [row["pred"], row.get("pred_swapped", row["pred"])]
    row["unreadable"] = sum(v is None for v in verdicts) / 2
    # free-text replies that stopped at their cap (caps.CAPS): flagged, not hidden
    row["cut_off"] = len(own.cut_off)
    for key, value in judgement.extra.items():
        if key != "pred_swapped":
            row[key] = _rounded(value)
    return row


def _rounded(value: Any) -> Any:
    if isinstance(value, list):
        return [round(v, 6) if isinstance(v, float) else v for v in value]
    return round(value, 6) if isinstance(value, float) else value


@dataclass
class JudgeSummary:
    samples: int = 0
    failed: int = 0
    no_verdict: int = 0
    cut_off: int = 0  # samples with a free-text reply stopped by its cap
    failures: list[tuple[str, str]] = field(default_factory=list)

    def add(self, row: dict[str, Any]) -> None:
        self.samples += 1
        self.cut_off += bool(row.get("cut_off"))
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

    try:
        asyncio.run(run())
    except CacheMissError as exc:  # the data file (or the --calibrate-on one) it was judging
        raise CacheMissError(f"{data}: {exc}") from None


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
