"""Tasks: what is judged and which record fields hold it (built-in presets or a TOML file)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ucsj.errors import InputError

PRESETS = ("rag-faithfulness", "summary-faithfulness", "literary-translation", "multilingual-chat")
KINDS = ("binary", "pointwise", "pairwise")
# The gold field of each kind: what records carry, `fit` learns and `report` measures against.
GOLD_FIELDS = {"binary": "label", "pointwise": "score", "pairwise": "preference"}


@dataclass(frozen=True)
class TaskFields:
    """Record field names: what the output must be faithful to, the optional input, the output."""

    source: str
    output: str
    input: str | None = None
    label: str = "label"  # binary: 1 pass / 0 fail
    output_b: str | None = None  # pairwise: the second response
    score: str = "score"  # pointwise: an integer rating on the task's scale
    preference: str = "preference"  # pairwise: "a" or "b"


@dataclass(frozen=True)
class Task:
    name: str
    description: str  # what a good output is; feeds criteria generation
    question: str  # the task's yes/no question asked directly (zero-shot judges)
    fields: TaskFields
    source_name: str = "Source"  # how prompts call each part
    input_name: str = "Input"
    output_name: str = "Output"
    guidelines: str = ""  # the annotation guidelines given to human annotators
    # CheckEval: (aspect, its definition, its seed questions) per aspect
    checkeval: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    kind: str = "binary"  # binary verdicts, pointwise scores or pairwise preferences
    scale: tuple[int, int] = (1, 7)  # pointwise: the lowest and highest score
    scoring_guide: str = ""  # pointwise: what each score means (CE-Judge's judgment prompt)

    def guide(self) -> str:
        """The scoring guide, or a plain one spanning the scale."""
        if self.scoring_guide:
            return self.scoring_guide
        low, high = self.scale
        return f"{low} = very poor, {(low + high) / 2:g} = acceptable, {high} = excellent."


def load_task(spec: str) -> Task:
    """A preset name or the path of a TOML task file."""
    if spec in PRESETS:
        text = resources.files("ucsj.tasks").joinpath(f"{spec}.toml").read_text(encoding="utf-8")
        return task_from_toml(text, origin=f"preset {spec}")
    path = Path(spec)
    if not path.exists():
        raise InputError(
            f"unknown task '{spec}': not a preset ({', '.join(PRESETS)}) and no such file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("task file is not UTF-8", path=str(path)) from None
    return task_from_toml(text, origin=str(path))


def task_from_toml(text: str, origin: str) -> Task:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}", path=origin) from None
    fields = data.get("fields")
    if not isinstance(fields, dict):
        raise InputError("missing [fields] table", path=origin)
    for key in ("source", "output"):
        _require_str(fields, key, origin, prefix="fields.")
    for key in ("name", "description"):
        _require_str(data, key, origin)
    kind = data.get("kind", "binary")
    if kind not in KINDS:
        raise InputError(f"'kind' must be one of {', '.join(KINDS)}", path=origin)
    if kind == "pairwise":
        _require_str(fields, "output_b", origin, prefix="fields.")
    scale = data.get("scale", [1, 7])
    if (
        not isinstance(scale, list)
        or len(scale) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in scale)
        or scale[0] >= scale[1]
    ):
        raise InputError("'scale' must be [lowest, highest] integers", path=origin)
    names = data.get("names", {})
    if not isinstance(names, dict):
        raise InputError("[names] must be a table", path=origin)
    return Task(
        name=data["name"],
        description=data["description"].strip(),
        question=str(data.get("question") or "Is the output faithful to the source?").strip(),
        kind=kind,
        scale=(scale[0], scale[1]),
        fields=TaskFields(
            source=fields["source"],
            output=fields["output"],
            input=fields.get("input") or None,
            label=fields.get("label", "label"),
            output_b=fields.get("output_b") or None,
            score=fields.get("score", "score"),
            preference=fields.get("preference", "preference"),
        ),
        source_name=names.get("source", "Source"),
        input_name=names.get("input", "Input"),
        output_name=names.get("output", "Output"),
        guidelines=str(data.get("guidelines", "")).strip(),
        checkeval=_checkeval(data.get("checkeval", {}), origin),
        scoring_guide=str(data.get("scoring_guide", "")).strip(),
    )


def _checkeval(table: Any, origin: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """Each aspect is a list of questions, or a table with its `definition` and `questions`."""
    if not isinstance(table, dict):
        raise InputError("[checkeval] must map aspect names to lists of questions", path=origin)
    aspects = []
    for aspect, entry in table.items():
        definition, questions = "", entry
        if isinstance(entry, dict):
            definition, questions = entry.get("definition", ""), entry.get("questions")
            if not isinstance(definition, str):
                raise InputError(
                    f"[checkeval] '{aspect}': definition must be a string", path=origin
                )
        if (
            not isinstance(questions, list)
            or not questions
            or not all(isinstance(q, str) and q.strip() for q in questions)
        ):
            raise InputError(
                f"[checkeval] '{aspect}' must be a non-empty list of questions", path=origin
            )
        aspects.append((aspect, " ".join(definition.split()), tuple(q.strip() for q in questions)))
    return tuple(aspects)


def _require_str(table: dict[str, Any], key: str, origin: str, prefix: str = "") -> None:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"'{prefix}{key}' must be a non-empty string", path=origin)
