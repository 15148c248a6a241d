"""CheckEval (Lee et al., 2025; yukyunglee/CheckEval): a checklist of yes/no questions per
aspect, answered one aspect per call, scored as the proportion of yes.

As the reference runs it:
- the checklist is built per aspect before judging: an aspect's definition and seed questions
  (the task's `[checkeval]`), expanded by question diversification and elaboration, then
  filtered (`ucsj gen-checklist`, an editable JSON file like criteria.json); without that
  file the task's seed questions are used as they are;
- one call per aspect, showing the aspect's definition, its questions and the `Q1: Yes`
  answer format;
- the score is the proportion of yes over all answered questions, passing at the threshold.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ucsj.answers import numbered_answers
from ucsj.data import Sample
from ucsj.errors import InputError
from ucsj.gen import complete_lines, parse_questions
from ucsj.io import open_output
from ucsj.llm import LLMClient, LLMSettings
from ucsj.methods.base import Context, Judgement, JudgeOptions, threshold_judgement
from ucsj.prompts import numbered, render, sample_values
from ucsj.tasks import Task

CHECKLIST_FORMAT = "ucsj.checkeval/1"
MAX_QUESTIONS = 30  # per aspect and step: bounds a runaway list, not a usable one


@dataclass(frozen=True)
class Aspect:
    name: str
    definition: str
    questions: tuple[str, ...]


def task_aspects(task: Task) -> list[Aspect]:
    """The task's aspects with their seed questions."""
    if not task.checkeval:
        raise InputError(f"task '{task.name}' has no [checkeval] checklist")
    return [Aspect(name, definition, qs) for name, definition, qs in task.checkeval]


async def checkeval(ctx: Context, sample: Sample) -> Judgement:
    """One call per aspect (definition, questions, `Q1: Yes` lines); the proportion of yes."""
    aspects = ctx.options.checklist or task_aspects(ctx.task)
    values = sample_values(ctx.task, sample)
    replies = await asyncio.gather(
        *(
            ctx.ask(
                render(
                    "checkeval_answer",
                    aspect=a.name,
                    definition=a.definition or a.name,
                    questions=numbered(list(a.questions)),
                    **values,
                ),
                "checkeval.answers",
            )
            for a in aspects
        )
    )
    answers: list[float | None] = []
    for aspect, reply in zip(aspects, replies, strict=True):
        answers += [
            None if v is None else float(v >= 0.5)
            for v in numbered_answers(reply, len(aspect.questions))
        ]
    return threshold_judgement(ctx, answers, {"items": answers})


# -- building the checklist (the reference's generation stage) ---------------------------------


async def build_aspect(ctx: Context, aspect: Aspect) -> tuple[Aspect, bool]:
    """Seeds, diversified and elaborated questions, filtered. Returns the aspect and whether
    the filter kept anything (when it keeps nothing, every candidate is kept and said so)."""
    values = {
        "aspect": aspect.name,
        "definition": aspect.definition or aspect.name,
        "seeds": "\n".join(f"{i}. {q}" for i, q in enumerate(aspect.questions, start=1)),
        "output_name": ctx.task.output_name.lower(),
        "description": ctx.task.description.strip(),
    }
    diversified, elaborated = await asyncio.gather(
        ctx.ask(render("checkeval_diversify", **values), "checkeval.questions"),
        ctx.ask(render("checkeval_elaborate", **values), "checkeval.questions"),
    )
    candidates = _unique(
        [
            *aspect.questions,
            *parse_questions(complete_lines(diversified), MAX_QUESTIONS),
            *parse_questions(complete_lines(elaborated), MAX_QUESTIONS),
        ]
    )
    reply = await ctx.ask(
        render(
            "checkeval_filter",
            candidates="\n".join(f"{i}. {q}" for i, q in enumerate(candidates, start=1)),
            **{k: values[k] for k in ("aspect", "definition", "output_name")},
        ),
        "checkeval.questions",
    )
    kept_keys = {_key(q) for q in parse_questions(complete_lines(reply), 3 * MAX_QUESTIONS)}
    kept = [q for q in candidates if _key(q) in kept_keys]
    return Aspect(aspect.name, aspect.definition, tuple(kept or candidates)), bool(kept)


def _key(question: str) -> str:
    return re.sub(r"\W+", " ", question.casefold()).strip()


def _unique(questions: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for q in questions:
        seen.setdefault(_key(q), q)
    return list(seen.values())


def generate_checklist(task: Task, settings: LLMSettings) -> dict[str, Any]:
    """The checklist file's content for `task` (every call through the cache)."""

    async def run() -> list[tuple[Aspect, bool]]:
        async with LLMClient(settings) as client:
            ctx = Context(client, task, JudgeOptions())
            return await asyncio.gather(*(build_aspect(ctx, a) for a in task_aspects(task)))

    built = asyncio.run(run())
    return {
        "format": CHECKLIST_FORMAT,
        "task": task.name,
        "generated_by": {"model": settings.model, "steps": "seed+diversify+elaborate+filter"},
        "aspects": [
            {
                "name": a.name,
                "definition": a.definition,
                "questions": list(a.questions),
                "filtered": filtered,
            }
            for a, filtered in built
        ],
    }


def save_checklist(content: dict[str, Any], path: Path) -> None:
    """Written atomically (or to standard output for "-")."""
    with open_output(path) as out:
        json.dump(content, out, ensure_ascii=False, indent=2)
        out.write("\n")


def load_checklist(path: Path, task: Task) -> list[Aspect]:
    """A checklist file (from `ucsj gen-checklist`, possibly edited by hand), checked."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"cannot read the checklist ({type(exc).__name__})", path=str(path)
        ) from None
    if not isinstance(data, dict) or data.get("format") != CHECKLIST_FORMAT:
        raise InputError(f"not a {CHECKLIST_FORMAT} checklist file", path=str(path))
    if data.get("task") != task.name:
        raise InputError(
            f"the checklist is for task '{data.get('task')}', not '{task.name}'", path=str(path)
        )
    aspects = []
    for i, entry in enumerate(data.get("aspects") or []):
        questions = entry.get("questions") if isinstance(entry, dict) else None
        if (
            not isinstance(entry.get("name") if isinstance(entry, dict) else None, str)
            or not isinstance(questions, list)
            or not questions
            or not all(isinstance(q, str) and q.strip() for q in questions)
        ):
            raise InputError(
                f"aspect {i + 1} needs a name and a non-empty list of questions", path=str(path)
            )
        definition = entry.get("definition") or ""
        aspects.append(Aspect(entry["name"], str(definition), tuple(q.strip() for q in questions)))
    if not aspects:
        raise InputError("the checklist has no aspects", path=str(path))
    return aspects
