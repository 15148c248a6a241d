"""Benchmark converters: raw MEMERAG and mFACE files to ucsj sample JSONL."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ucsj.errors import InputError
from ucsj.io import dump_json_line, open_output, read_json_lines
from ucsj.languages import is_language_code

MEMERAG_LABELS = {"Supported": 1, "Not Supported": 0}  # "Challenging to determine" is dropped
MFACE_RULES = ("avg", "min", "max")
# mFACE's `lang` column may hold XL-Sum language names rather than codes.
LANGUAGE_NAMES = {
    "english": "en",
    "french": "fr",
    "spanish": "es",
    "hindi": "hi",
    "arabic": "ar",
    "amharic": "am",
    "burmese": "my",
    "swahili": "sw",
    "thai": "th",
    "german": "de",
    "chinese": "zh",
    "japanese": "ja",
    "russian": "ru",
    "portuguese": "pt",
    "turkish": "tr",
    "vietnamese": "vi",
    "indonesian": "id",
    "korean": "ko",
    "bengali": "bn",
    "urdu": "ur",
}


@dataclass(frozen=True)
class ConvertSummary:
    written: int
    dropped: int
    labels: dict[int, int]


def _lang_from(path: Path, lang: str | None) -> str:
    code = lang or path.stem.split(".")[0].lower()
    if not is_language_code(code):
        raise InputError(
            f"cannot tell the language from the file name ('{path.stem}'); give --lang",
            path=str(path),
        )
    return code


def memerag_samples(path: Path, lang: str | None = None) -> Iterator[dict[str, Any] | None]:
    """One sample per labelled answer sentence; None for each dropped sentence."""
    code = _lang_from(path, lang)
    for line, record in read_json_lines(path):
        if not isinstance(record, dict):
            raise InputError("record is not a JSON object", path=str(path), line=line)
        for name in ("query_id", "query", "context", "answer"):
            if name not in record:
                raise InputError(
                    "missing (is this a MEMERAG file?)", path=str(path), line=line, field=name
                )
        passages = [p.get("text", "") if isinstance(p, dict) else str(p) for p in record["context"]]
        for sentence in record["answer"]:
            label = MEMERAG_LABELS.get(sentence.get("factuality"))
            if label is None:
                yield None
                continue
            yield {
                "id": f"{code}-{record['query_id']}-{sentence['sentence_id']}",
                "lang": code,
                "context": passages,
                "query": record["query"],
                "answer": sentence["sentence"],
                "label": label,
            }


def mface_samples(
    path: Path, rule: str = "avg", threshold: float = 0.5, lang: str | None = None
) -> Iterator[dict[str, Any] | None]:
    """Rows of the mFACE spreadsheet (CSV); label = 1 when q2_<rule> >= threshold."""
    if rule not in MFACE_RULES:
        raise InputError(f"--rule must be one of {', '.join(MFACE_RULES)}")
    column = f"q2_{rule}"
    try:
        handle = path.open(encoding="utf-8", newline="")
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    with handle:
        reader = csv.DictReader(handle)
        missing = {"id", "lang", "input", "summary", column} - set(reader.fieldnames or [])
        if missing:
            raise InputError(
                f"missing columns: {', '.join(sorted(missing))} (is this the mFACE "
                "spreadsheet saved as CSV?)",
                path=str(path),
            )
        for row in reader:
            line = reader.line_num
            raw_lang = (row["lang"] or "").strip().lower()
            code = lang or LANGUAGE_NAMES.get(raw_lang, raw_lang)
            if not is_language_code(code):
                raise InputError(
                    f"unknown language '{row['lang']}'", path=str(path), line=line, field="lang"
                )
            value = (row[column] or "").strip()
            if not value:
                yield None
                continue
            try:
                score = float(value)
            except ValueError:
                raise InputError(
                    f"not a number: {value!r}", path=str(path), line=line, field=column
                ) from None
            yield {
                "id": f"{code}-{row['id']}",
                "lang": code,
                "article": row["input"],
                "summary": row["summary"],
                "label": int(score >= threshold),
                "system": row.get("system", ""),
            }


def write_samples(samples: Iterator[dict[str, Any] | None], output: Path) -> ConvertSummary:
    written = dropped = 0
    labels = {0: 0, 1: 0}
    seen: set[str] = set()
    with open_output(output) as out:
        for sample in samples:
            if sample is None:
                dropped += 1
                continue
            if sample["id"] in seen:
                raise InputError(f"two samples would share the id '{sample['id']}'")
            seen.add(sample["id"])
            out.write(dump_json_line(sample))
            written += 1
            labels[sample["label"]] += 1
    return ConvertSummary(written, dropped, labels)
