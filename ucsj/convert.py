"""Benchmark converters: raw MEMERAG and mFACE files to ucsj sample JSONL."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ucsj.errors import InputError
from ucsj.io import dump_json_line, input_path, open_output, read_json_lines
from ucsj.languages import is_language_code
from ucsj.tasks import GOLD_FIELDS

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


# What a converter yields for a row a filter (--subset) leaves out; None is a row without a label.
OTHER_SUBSET = "other subset"


@dataclass(frozen=True)
class ConvertSummary:
    written: int
    dropped: int  # rows without a label
    labels: dict[str, int]  # gold value (label, score or preference) -> count
    filtered: int = 0  # rows of subsets not asked for

    def describe(self) -> str:
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(self.labels.items()))
        parts = [f"{self.written} samples ({counts})"]
        if self.dropped or not self.filtered:
            parts.append(f"dropped {self.dropped} without a label")
        if self.filtered:
            parts.append(f"left out {self.filtered} of other subsets")
        return "; ".join(parts)


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
    with contextlib.closing(_csv_text_lines(path)) as lines:
        reader = csv.DictReader(lines)
        missing = {"id", "lang", "input", "summary", column} - set(reader.fieldnames or [])
        if missing:
            raise InputError(
                f"missing columns: {', '.join(sorted(missing))} (is this the mFACE "
                "spreadsheet saved as CSV?)",
                path=str(path),
            )
        for row in _csv_rows(reader, path):
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


def write_samples(samples: Iterator[dict[str, Any] | str | None], output: Path) -> ConvertSummary:
    written = dropped = filtered = 0
    labels: dict[str, int] = {}
    seen: set[str] = set()
    # held: an input error on a later row leaves no partial output on stdout either
    with open_output(output, hold=True) as out:
        for sample in samples:
            if sample is None:
                dropped += 1
                continue
            if sample == OTHER_SUBSET:
                filtered += 1
                continue
            if sample["id"] in seen:
                raise InputError(f"two samples would share the id '{sample['id']}'")
            seen.add(sample["id"])
            out.write(dump_json_line(sample))
            written += 1
            gold = next(str(sample[k]) for k in GOLD_FIELDS.values() if k in sample)
            labels[gold] = labels.get(gold, 0) + 1
    return ConvertSummary(written, dropped, labels, filtered)


# CE-Judge evaluates MM-Eval's chat and reasoning subsets; others only on request (--subset)
MM_EVAL_SUBSETS = ("chat", "reasoning")


def mm_eval_samples(
    path: Path, subsets: tuple[str, ...] = (), lang: str | None = None
) -> Iterator[dict[str, Any] | str | None]:
    """MM-Eval rows (prompt, chosen, rejected, language, subset) as pairwise samples.

    Which position holds the chosen response is decided by a hash of the id, so about half
    the pairs put it second and a judge cannot score well by always picking one position.
    """
    for number, row in _table_rows(path):
        where = {"path": str(path), "line": number}
        for name in ("prompt", "chosen", "rejected"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise InputError("missing or empty (is this MM-Eval?)", field=name, **where)
        subset = str(row.get("subset") or "")
        if subset not in (subsets or MM_EVAL_SUBSETS):
            yield OTHER_SUBSET
            continue
        code = lang or str(row.get("language") or "").lower()
        if not is_language_code(code):
            raise InputError(f"unknown language '{row.get('language')}'", field="language", **where)
        raw_id = str(row.get("id") if row.get("id") is not None else number)
        chosen_first = hashlib.blake2b(raw_id.encode(), digest_size=1).digest()[0] % 2 == 0
        a, b = (
            (row["chosen"], row["rejected"]) if chosen_first else (row["rejected"], row["chosen"])
        )
        yield {
            "id": f"{code}-{subset or 'all'}-{raw_id}",
            "lang": code,
            "subset": subset,
            "prompt": row["prompt"],
            "response_a": a,
            "response_b": b,
            "preference": "a" if chosen_first else "b",
        }


def liteval_samples(
    path: Path, score_column: str = "rating", shift: int = 0
) -> Iterator[dict[str, Any] | None]:
    """LitEval rating rows (source, tgt, pair, rating; `;` or `,` separated) as pointwise
    samples in the target language; `shift` moves a 0-6 scale onto 1-7."""
    for number, row in _table_rows(path):
        where = {"path": str(path), "line": number}
        for name in ("source", "tgt", "pair"):
            if not str(row.get(name) or "").strip():
                raise InputError(
                    "missing or empty (is this a LitEval rating file?)", field=name, **where
                )
        source_lang, _, target_lang = str(row["pair"]).partition("-")
        if not (is_language_code(source_lang) and is_language_code(target_lang)):
            raise InputError(f"pair '{row['pair']}' is not like de-en", field="pair", **where)
        value = str(row.get(score_column) or "").strip()
        if not value:
            yield None
            continue
        try:
            score = int(float(value)) + shift
        except ValueError:
            raise InputError(f"not a number: {value!r}", field=score_column, **where) from None
        yield {
            "id": f"{row['pair']}-{number}",
            "lang": target_lang,
            "source_lang": source_lang,
            "pair": row["pair"],
            "source": row["source"],
            "translation": row["tgt"],
            "score": score,
        }


def _table_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or row number, row) from JSONL, CSV (`,` or `;`) or Parquet (needs pyarrow)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        yield from read_json_lines(path)
        return
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError(
                "reading Parquet needs pyarrow (pip install pyarrow), or convert "
                "the file to JSONL first",
                path=str(path),
            ) from None
        for number, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield number, row
        return
    with contextlib.closing(_csv_text_lines(path)) as lines:
        first = next(lines, "")
        reader = csv.DictReader(
            itertools.chain([first], lines),
            delimiter=";" if first.count(";") > first.count(",") else ",",
        )
        for row in _csv_rows(reader, path):
            yield reader.line_num, row


def _csv_text_lines(path: Path) -> Iterator[str]:
    """The lines of a CSV input decoded as UTF-8 one by one, so that bytes which are not UTF-8
    fail naming their line (a one-shot input is spooled first)."""
    try:
        handle = input_path(path).open("rb")
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=str(path)) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(
                    "bytes are not UTF-8: save the spreadsheet as CSV UTF-8 and convert again",
                    path=str(path),
                    line=number,
                ) from None
            yield text.removeprefix("\ufeff") if number == 1 else text  # Excel's "CSV UTF-8"


def _csv_rows(reader: Any, path: Path) -> Iterator[dict[str, Any]]:
    """The reader's rows; a CSV syntax error names its line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(
                f"not a readable CSV: {exc}", path=str(path), line=reader.line_num
            ) from None
        yield row
