"""Stage 1: the LLM writes the task's concepts, then yes/no criterion questions, in English."""

from __future__ import annotations

import asyncio
import re

from ucsj.criteria import CriteriaSet, build_criteria
from ucsj.errors import BackendError, InputError
from ucsj.llm import ChatRequest, Completion, LLMClient, LLMSettings
from ucsj.llm.client import UnusableResponse
from ucsj.prompts import render
from ucsj.tasks import Task

GEN_MODES = ("per-concept", "joint")
MAX_TOKENS = 1024
_ITEM_PREFIX = re.compile(r"^\s*(?:[-*•·>]+|\(?\d{1,3}[.):]|\(?[a-z][.)]|q\d{1,3}[.:)])\s*", re.I)
_MARKUP = re.compile(r"[*_`#]+")
_CONCEPT_LINE = re.compile(r"^(.{1,60}?)\s*(?::|\s[-–—]\s)\s*(.*)$")


def clean_item(line: str) -> str:
    """Strip list markers, numbering and markdown emphasis from one line."""
    text = _MARKUP.sub("", line).strip()
    previous = None
    while previous != text:
        previous, text = text, _ITEM_PREFIX.sub("", text).strip()
    return " ".join(text.split())


def complete_lines(completion: Completion) -> list[str]:
    """The response's lines; the last one is dropped when the response was cut off."""
    lines = completion.text.splitlines()
    if completion.truncated and lines:
        lines = lines[:-1]
    return lines


def parse_concepts(completion: Completion, limit: int) -> list[tuple[str, str]]:
    """(name, description) pairs from "Name: description" lines, de-duplicated."""
    concepts: list[tuple[str, str]] = []
    seen: set[str] = set()
    for line in complete_lines(completion):
        item = clean_item(line)
        if not item:
            continue
        match = _CONCEPT_LINE.match(item)
        if not match:
            continue
        name, description = match.group(1).strip(" ."), match.group(2)
        if not name or len(name.split()) > 6:
            continue
        key = name.casefold()
        if key in seen:
            continue
        seen.add(key)
        concepts.append((name, description.strip()))
        if len(concepts) == limit:
            break
    return concepts


def parse_questions(lines: list[str], limit: int) -> list[str]:
    """Yes/no questions (lines ending in '?'), de-duplicated, at most `limit`."""
    questions: list[str] = []
    seen: set[str] = set()
    for line in lines:
        item = clean_item(line)
        if not item.endswith("?") or len(item) < 8:
            continue
        key = re.sub(r"\W+", " ", item.casefold()).strip()
        if key in seen:
            continue
        seen.add(key)
        questions.append(item)
        if len(questions) == limit:
            break
    return questions


def parse_joint_questions(
    completion: Completion, names: list[str], limit: int
) -> dict[str, list[str]]:
    """Questions grouped under "Concept: <name>" headings, matched to the concept names."""
    groups: dict[str, list[str]] = {name: [] for name in names}
    current: str | None = None
    for line in complete_lines(completion):
        heading = re.match(
            r"^\W*concept\W*\s*(?:\d+\W*)?(.+)$", _MARKUP.sub("", line).strip(), re.I
        )
        if heading:
            current = _match_name(heading.group(1), names)
            continue
        if current is not None:
            groups[current].append(line)
    return {name: parse_questions(lines, limit) for name, lines in groups.items()}


def _distinct_questions(
    concepts: list[tuple[str, str]], grouped: dict[str, list[str]]
) -> list[tuple[str, str, list[str]]]:
    """Drop a question already asked under an earlier concept (small models repeat them)."""
    seen: set[str] = set()
    out = []
    for name, description in concepts:
        fresh = []
        for question in grouped.get(name, []):
            key = re.sub(r"\W+", " ", question.casefold()).strip()
            if key not in seen:
                seen.add(key)
                fresh.append(question)
        out.append((name, description, fresh))
    return out


def _match_name(text: str, names: list[str]) -> str | None:
    text = text.strip(" :.").casefold()
    for name in names:
        if name.casefold() == text or text.startswith(name.casefold()):
            return name
    for name in names:
        if name.casefold() in text:
            return name
    return None


def _request(model: str, prompt: str) -> ChatRequest:
    return ChatRequest.chat(
        model,
        [{"role": "user", "content": prompt}],
        max_tokens=MAX_TOKENS,
        logprobs=False,
        top_logprobs=0,
    )


def _require_items(kind: str):
    def check(completion: Completion) -> None:
        if not clean_item(completion.text):
            raise UnusableResponse(f"the model wrote no {kind}")

    return check


async def generate_async(
    task: Task,
    client: LLMClient,
    *,
    mode: str = "per-concept",
    n_concepts: int = 5,
    n_questions: int = 5,
) -> CriteriaSet:
    if mode not in GEN_MODES:
        raise InputError(f"--gen must be one of {', '.join(GEN_MODES)}")
    if n_concepts < 1 or n_questions < 1:
        raise InputError("--concepts and --questions must be at least 1")
    model = client.settings.model
    common = {
        "task_name": task.name,
        "description": task.description,
        "source_name": task.source_name.lower(),
        "input_name": task.input_name.lower(),
        "output_name": task.output_name.lower(),
    }
    reply = await client.complete(
        _request(model, render("gen_concepts", n=str(n_concepts), **common)),
        validate=_require_items("concepts"),
        allow_truncated=True,
    )
    concepts = parse_concepts(reply, n_concepts)
    if not concepts:
        raise BackendError(
            f"the model's answer holds no concept in the form 'Name: description':"
            f" {reply.text[:200]!r}"
        )
    if mode == "per-concept":
        replies = await asyncio.gather(
            *(
                client.complete(
                    _request(
                        model,
                        render(
                            "gen_questions_concept",
                            n=str(n_questions),
                            concept_name=name,
                            concept_description=description or name,
                            **common,
                        ),
                    ),
                    validate=_require_items("questions"),
                    allow_truncated=True,
                )
                for name, description in concepts
            )
        )
        grouped = {
            name: parse_questions(complete_lines(r), n_questions)
            for (name, _), r in zip(concepts, replies, strict=True)
        }
    else:
        concept_list = "\n".join(f"- {name}: {description}" for name, description in concepts)
        reply = await client.complete(
            _request(
                model,
                render(
                    "gen_questions_joint", n=str(n_questions), concept_list=concept_list, **common
                ),
            ),
            validate=_require_items("questions"),
            allow_truncated=True,
        )
        grouped = parse_joint_questions(reply, [name for name, _ in concepts], n_questions)
    kept = [
        (name, description, questions)
        for name, description, questions in _distinct_questions(concepts, grouped)
        if questions
    ]
    if not kept:
        raise BackendError("the model wrote no usable yes/no question for any concept")
    return build_criteria(
        task.name,
        kept,
        {"model": model, "gen": mode, "concepts": n_concepts, "questions": n_questions},
    )


def generate_criteria(task: Task, settings: LLMSettings, **options: object) -> CriteriaSet:
    """Synchronous entry point: run generation with a fresh client."""

    async def run() -> CriteriaSet:
        async with LLMClient(settings) as client:
            return await generate_async(task, client, **options)  # type: ignore[arg-type]

    return asyncio.run(run())
