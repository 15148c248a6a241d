"""The criteria set: concepts and their yes/no questions, its file format and fingerprint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ucsj.errors import InputError
from ucsj.io import read_json, write_json
from ucsj.llm.request import canonical_json

FORMAT = "ucsj.criteria/1"


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    yes_means: str = "good"  # "bad" flips the answer so that 1 always means good


@dataclass(frozen=True)
class Concept:
    id: str
    name: str
    description: str
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class CriteriaSet:
    task: str
    concepts: tuple[Concept, ...]
    generated_by: dict[str, Any] = field(default_factory=dict)

    @property
    def questions(self) -> list[Question]:
        return [q for c in self.concepts for q in c.questions]

    @property
    def fingerprint(self) -> str:
        """Hashes the concept and question ids and texts only: editing a question changes it."""
        material = [[c.id, c.name, [[q.id, q.text] for q in c.questions]] for c in self.concepts]
        return "sha256:" + hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        concepts = []
        for c in self.concepts:
            questions = []
            for q in c.questions:
                item = {"id": q.id, "text": q.text}
                if q.yes_means != "good":
                    item["yes_means"] = q.yes_means
                questions.append(item)
            concepts.append(
                {"id": c.id, "name": c.name, "description": c.description, "questions": questions}
            )
        return {
            "format": FORMAT,
            "task": self.task,
            "generated_by": self.generated_by,
            "concepts": concepts,
            "fingerprint": self.fingerprint,
        }

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json())


def build_criteria(
    task: str, concepts: list[tuple[str, str, list[str]]], generated_by: dict[str, Any]
) -> CriteriaSet:
    """Assign ids c1, c1.q1, … to (name, description, questions) triples."""
    built = []
    for ci, (name, description, questions) in enumerate(concepts, start=1):
        cid = f"c{ci}"
        qs = tuple(Question(f"{cid}.q{qi}", text) for qi, text in enumerate(questions, start=1))
        built.append(Concept(cid, name, description, qs))
    return CriteriaSet(task, tuple(built), generated_by)


def load_criteria(path: str | Path) -> CriteriaSet:
    data = read_json(path, "criteria")
    return criteria_from_json(data, str(path))


def criteria_from_json(data: Any, origin: str) -> CriteriaSet:
    def fail(message: str) -> InputError:
        return InputError(f"invalid criteria set: {message}", path=origin)

    if not isinstance(data, dict):
        raise fail("the file must hold a JSON object")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise fail(f"format '{fmt}' is not supported (expected '{FORMAT}')")
    task = data.get("task")
    if not isinstance(task, str) or not task:
        raise fail("'task' must name the task (a preset or a TOML file)")
    raw_concepts = data.get("concepts")
    if not isinstance(raw_concepts, list) or not raw_concepts:
        raise fail("'concepts' must be a non-empty list")
    seen: set[str] = set()
    concepts = []
    for i, rc in enumerate(raw_concepts):
        where = f"concepts[{i}]"
        if not isinstance(rc, dict):
            raise fail(f"{where} is not an object")
        cid = _id(rc, where, seen, fail)
        name = rc.get("name")
        if not isinstance(name, str) or not name.strip():
            raise fail(f"{where} ('{cid}') needs a non-empty 'name'")
        raw_questions = rc.get("questions")
        if not isinstance(raw_questions, list) or not raw_questions:
            raise fail(f"concept '{cid}' has no questions")
        questions = []
        for j, rq in enumerate(raw_questions):
            qwhere = f"{where}.questions[{j}]"
            if not isinstance(rq, dict):
                raise fail(f"{qwhere} is not an object")
            qid = _id(rq, qwhere, seen, fail)
            text = rq.get("text")
            if not isinstance(text, str) or not text.strip():
                raise fail(f"question '{qid}' needs a non-empty 'text'")
            yes_means = rq.get("yes_means", "good")
            if yes_means not in ("good", "bad"):
                raise fail(f"question '{qid}': 'yes_means' must be \"good\" or \"bad\"")
            questions.append(Question(qid, " ".join(text.split()), yes_means))
        concepts.append(
            Concept(cid, name.strip(), str(rc.get("description") or "").strip(), tuple(questions))
        )
    generated_by = data.get("generated_by") if isinstance(data.get("generated_by"), dict) else {}
    criteria = CriteriaSet(task, tuple(concepts), generated_by)
    stated = data.get("fingerprint")
    # A hand-written file may carry none (it is computed); one that disagrees with the content
    # means the questions were edited after scores were made with them.
    if stated is not None and stated != criteria.fingerprint:
        raise fail(
            f"its fingerprint {stated} does not match its content ({criteria.fingerprint}): "
            "were concepts or questions edited? Remove the 'fingerprint' field to accept the "
            "edit (scores made with the old criteria will no longer match)"
        )
    return criteria


def _id(obj: dict[str, Any], where: str, seen: set[str], fail: Any) -> str:
    value = obj.get("id")
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{where} needs a non-empty string 'id'")
    if value in seen:
        raise fail(f"duplicate id '{value}'")
    seen.add(value)
    return value
