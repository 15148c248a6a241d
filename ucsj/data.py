"""Samples: reading and validating data files against a task's fields."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ucsj.errors import InputError
from ucsj.io import parse_json_line, read_json_lines, read_text_lines
from ucsj.languages import is_language_code
from ucsj.tasks import GOLD_FIELDS, Task


@dataclass(frozen=True)
class Sample:
    id: str
    lang: str
    source: tuple[str, ...]  # one text, or the passages in order
    input: str | None
    output: str
    label: int | None  # binary tasks
    line: int
    output_b: str | None = None  # pairwise tasks: the second response
    score: int | None = None  # pointwise tasks: the gold rating
    preference: str | None = None  # pairwise tasks: "a" or "b", the better response
    groups: tuple[tuple[str, str], ...] = ()  # report breakdowns carried through (GROUP_FIELDS)
    source_lang: str | None = None  # the source's language where it differs (translation)

    @property
    def source_language(self) -> str:
        return self.source_lang or self.lang

    def gold(self, kind: str) -> dict[str, Any]:
        """The gold field of the task kind, as scores and prediction records carry it."""
        name = GOLD_FIELDS[kind]
        return {name: getattr(self, name)}


# Optional record fields that reports break results down by: MM-Eval's subset (chat,
# reasoning, ...) and LitEval's language pair (de-en, ...). They travel into scores and
# predictions unchanged.
GROUP_FIELDS = ("subset", "pair")


@dataclass(frozen=True)
class DataSummary:
    path: str
    count: int
    labelled: int
    langs: dict[str, int]


def _id_hash(sample_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(sample_id.encode("utf-8"), digest_size=8).digest(), "big")


# Up to this many ids a set finds a repeated hash without importing numpy (~60 ms of every
# `score` start-up); beyond, numpy sorts the packed hashes, 8 bytes an id.
SET_CHECK_LIMIT = 1 << 16


def _has_repeats(hashes: array) -> bool:
    if len(hashes) <= SET_CHECK_LIMIT:
        return len(set(hashes)) != len(hashes)
    import numpy as np  # here: the command line starts without it

    return len(np.unique(np.frombuffer(hashes, dtype=np.uint64))) != len(hashes)


def check_lang_option(lang: str | None) -> None:
    if lang is not None and not is_language_code(lang):
        raise InputError(f"--lang '{lang}' is not an ISO 639-1 code (e.g. en, fr, de, hi)")


class SampleFile:
    """A JSONL data file. `validate()` reads it all once, before any LLM request; iterating
    streams it again, so memory does not grow with the file."""

    def __init__(
        self, path: str | Path, task: Task, lang: str | None = None, require_label: bool = False
    ) -> None:
        check_lang_option(lang)
        self.path, self.task, self.lang, self.require_label = Path(path), task, lang, require_label

    def validate(self) -> DataSummary:
        # Ids are checked for duplicates through 8-byte hashes in an array, so memory stays
        # small for large files; only when a hash repeats is the file read again to name lines.
        hashes = array("Q")
        langs: dict[str, int] = {}
        labelled = 0
        for sample in self._parse():
            hashes.append(_id_hash(sample.id))
            langs[sample.lang] = langs.get(sample.lang, 0) + 1
            labelled += next(iter(sample.gold(self.task.kind).values())) is not None
        if not hashes:
            raise InputError("no records: the file is empty", path=str(self.path))
        if _has_repeats(hashes):
            self._raise_duplicate()
        return DataSummary(str(self.path), len(hashes), labelled, dict(sorted(langs.items())))

    def _raise_duplicate(self) -> None:
        seen: dict[str, int] = {}
        for sample in self._parse():
            if sample.id in seen:
                raise InputError(
                    f"duplicate id '{sample.id}' (first on line {seen[sample.id]})",
                    path=str(self.path),
                    line=sample.line,
                    field="id",
                )
            seen[sample.id] = sample.line

    def __iter__(self) -> Iterator[Sample]:
        return self._parse()

    def raw_lines(self) -> Iterator[tuple[int, str]]:
        """(line number, text) of every non-blank line, unparsed (for the record memo)."""
        return read_text_lines(self.path)

    def parse(self, line: int, text: str) -> Sample:
        """One line of this file as a sample (a line `validate()` has already accepted)."""
        return sample_from_record(
            parse_json_line(text, str(self.path), line),
            self.task,
            self.lang,
            str(self.path),
            line,
            self.require_label,
        )

    def _parse(self) -> Iterator[Sample]:
        for line, record in read_json_lines(self.path):
            yield sample_from_record(
                record, self.task, self.lang, str(self.path), line, self.require_label
            )


def sample_from_record(
    record: Any, task: Task, lang: str | None, path: str, line: int, require_label: bool = False
) -> Sample:
    def fail(message: str, field: str | None = None) -> InputError:
        return InputError(message, path=path, line=line, field=field)

    if not isinstance(record, dict):
        raise fail("record is not a JSON object")
    fields = task.fields
    sample_id = record.get("id")
    if sample_id is None:
        raise fail("missing required field", "id")
    if not isinstance(sample_id, str) or not sample_id.strip():
        raise fail(f"must be a non-empty string, got {_type_name(sample_id)}", "id")
    record_lang = record.get("lang")
    if record_lang is None:
        if lang is None:
            raise fail("missing, and no --lang given for records without one", "lang")
        record_lang = lang
    elif not is_language_code(record_lang):
        raise fail(f"'{record_lang}' is not an ISO 639-1 language code", "lang")
    kind = task.kind
    return Sample(
        id=sample_id,
        lang=record_lang,
        source=_source(record, fields.source, fail),
        input=_text(record, fields.input, fail) if fields.input else None,
        output=_text(record, fields.output, fail),
        label=_label(record, fields.label, fail, require_label) if kind == "binary" else None,
        line=line,
        output_b=_text(record, fields.output_b, fail) if fields.output_b else None,
        score=_score(record, fields.score, task.scale, fail) if kind == "pointwise" else None,
        preference=_preference(record, fields.preference, fail) if kind == "pairwise" else None,
        groups=_groups(record, fail),
        source_lang=_source_lang(record, fail),
    )


def _source_lang(record: dict[str, Any], fail: Any) -> str | None:
    value = record.get("source_lang")
    if value is None:
        return None
    if not is_language_code(value):
        raise fail(f"'{value}' is not an ISO 639-1 language code", "source_lang")
    return value


def _text(record: dict[str, Any], name: str, fail: Any) -> str:
    if name not in record or record[name] is None:
        raise fail("missing required field", name)
    value = record[name]
    if not isinstance(value, str):
        raise fail(f"must be a string, got {_type_name(value)}", name)
    if not value.strip():
        raise fail("is empty", name)
    return value


def _source(record: dict[str, Any], name: str, fail: Any) -> tuple[str, ...]:
    """A string, or a list of passages (strings or objects with a `text`)."""
    if name not in record or record[name] is None:
        raise fail("missing required field", name)
    value = record[name]
    if isinstance(value, str):
        if not value.strip():
            raise fail("is empty", name)
        return (value,)
    if not isinstance(value, list):
        raise fail(f"must be a string or a list of passages, got {_type_name(value)}", name)
    passages = []
    for i, item in enumerate(value):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise fail(f"passage {i} must be a string or an object with a 'text' string", name)
        passages.append(text)
    if not any(p.strip() for p in passages):
        raise fail("has no non-empty passage", name)
    return tuple(passages)


def _label(record: dict[str, Any], name: str, fail: Any, required: bool) -> int | None:
    value = record.get(name)
    if value is None:
        if required:
            raise fail("missing: labels are needed here", name)
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    raise fail(f"must be 1 (pass), 0 (fail) or null, got {value!r}", name)


def _score(record: dict[str, Any], name: str, scale: tuple[int, int], fail: Any) -> int | None:
    value = record.get(name)
    if value is None:
        return None
    low, high = scale
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(f"must be an integer from {low} to {high} or null, got {value!r}", name)
    return value


def _preference(record: dict[str, Any], name: str, fail: Any) -> str | None:
    value = record.get(name)
    if value is None:
        return None
    if value not in ("a", "b"):
        raise fail(f'must be "a", "b" or null, got {value!r}', name)
    return value


def _groups(record: dict[str, Any], fail: Any) -> tuple[tuple[str, str], ...]:
    groups = []
    for name in GROUP_FIELDS:
        value = record.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise fail(f"must be a string, got {_type_name(value)}", name)
        groups.append((name, value))
    return tuple(groups)


def _type_name(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), "a value")
