"""Prompt templates (package data files) and the fencing of judged texts as data."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from string import Template

from ucsj.data import Sample
from ucsj.tasks import Task


@cache
def template(name: str) -> Template:
    text = resources.files("ucsj.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return Template(text.strip("\n"))


def render(name: str, **values: str) -> str:
    """Fill a template; every placeholder must be given (a typo fails loudly)."""
    return template(name).substitute(**values)


_TAG = re.compile(r"</?\s*(data|source|passage|input|output)\b[^>]*>", re.I)


def fence(tag: str, text: str) -> str:
    """Wrap a judged text in tags; tags inside it are defused so it cannot close the fence."""
    safe = _TAG.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text.strip())
    return f"<{tag}>\n{safe}\n</{tag}>"


def source_fence(sample: Sample) -> str:
    """One source text as it is; several passages numbered [1], [2], ..."""
    if len(sample.source) == 1:
        return fence("source", sample.source[0])
    return fence(
        "source",
        "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(sample.source, start=1)),
    )


def material_block(task: Task, sample: Sample) -> str:
    """What the judged output was written from, as fenced data: the source, then the input."""
    parts = [f"{task.source_name}:\n{source_fence(sample)}"]
    if sample.input is not None:
        parts.append(f"{task.input_name}:\n{fence('input', sample.input)}")
    return "\n\n".join(parts)


def sample_block(task: Task, sample: Sample) -> str:
    """The sample as fenced data: source first, then input, then output."""
    output = f"{task.output_name}:\n{fence('output', sample.output)}"
    return f"{material_block(task, sample)}\n\n{output}"


def pair_block(task: Task, sample: Sample, first: str, second: str) -> str:
    """A pairwise sample as fenced data: the source (and input), then Response A and B."""
    parts = [material_block(task, sample)]
    parts.append(f"{task.output_name} A:\n{fence('output', first)}")
    parts.append(f"{task.output_name} B:\n{fence('output', second)}")
    return "\n\n".join(parts)


def numbered(questions: list[str]) -> str:
    return "\n".join(f"Q{i}. {q}" for i, q in enumerate(questions, start=1))


def sample_values(task: Task, sample: Sample) -> dict[str, str]:
    """Template values every judging prompt shares: the fenced sample and the parts' names."""
    return {
        "output_name": task.output_name.lower(),
        "source_name": task.source_name.lower(),
        "input_name": task.input_name.lower(),
        "and_input": f" and the {task.input_name.lower()}" if sample.input else "",
        "sample": sample_block(task, sample),
        "question": task.question,
        "description": task.description,
    }
