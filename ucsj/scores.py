"""Scores files: the records `ucsj score` writes, read back and checked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ucsj.errors import InputError
from ucsj.io import read_json_lines
from ucsj.tasks import GOLD_FIELDS as TARGETS  # the gold field each kind's scores carry


@dataclass(frozen=True)
class ScoreRecord:
    id: str
    lang: str
    label: int | None
    z: dict[str, float | None]
    s: dict[str, float | None]
    criteria: str
    model: str
    scoring: str
    error: str | None
    kind: str = "binary"  # the task kind the sample was scored for
    score: int | None = None  # pointwise gold
    preference: str | None = None  # pairwise gold
    z_b: dict[str, float | None] | None = None  # pairwise: the second response
    s_b: dict[str, float | None] | None = None
    groups: dict[str, str] = field(default_factory=dict)  # subset, pair

    @property
    def gold(self) -> Any:
        return getattr(self, TARGETS[self.kind])

    def gold_fields(self) -> dict[str, Any]:
        return {TARGETS[self.kind]: self.gold}


def read_scores(path: str | Path) -> list[ScoreRecord]:
    records = []
    for line, raw in read_json_lines(path):
        records.append(score_record(raw, str(path), line))
    if not records:
        raise InputError("no records: the scores file is empty", path=str(path))
    return records


def score_record(raw: Any, path: str, line: int) -> ScoreRecord:
    def fail(message: str, name: str) -> InputError:
        return InputError(message, path=path, line=line, field=name)

    if not isinstance(raw, dict):
        raise InputError("record is not a JSON object", path=path, line=line)
    kind = "pairwise" if "z_b" in raw else "pointwise" if "score" in raw else "binary"
    required = [
        ("id", str),
        ("lang", str),
        ("z", dict),
        ("s", dict),
        ("criteria", str),
        ("model", str),
        ("scoring", str),
    ]
    if kind == "pairwise":
        required += [("z_b", dict), ("s_b", dict)]
    for name, expected in required:
        if not isinstance(raw.get(name), expected):
            raise fail(
                "missing or of the wrong type (is this a scores file from `ucsj score`?)", name
            )
    gold = _gold(raw, kind, fail)
    for name in ("z", "s", "z_b", "s_b"):
        for key, value in (raw.get(name) or {}).items():
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
            ):
                raise fail(f"'{key}' must be a number in [0, 1] or null", name)
    return ScoreRecord(
        raw["id"],
        raw["lang"],
        gold if kind == "binary" else None,
        raw["z"],
        raw["s"],
        raw["criteria"],
        raw["model"],
        raw["scoring"],
        raw.get("error"),
        kind=kind,
        score=gold if kind == "pointwise" else None,
        preference=gold if kind == "pairwise" else None,
        z_b=raw.get("z_b"),
        s_b=raw.get("s_b"),
        groups={k: v for k in ("subset", "pair") if isinstance(v := raw.get(k), str)},
    )


def _gold(raw: dict[str, Any], kind: str, fail: Callable[[str, str], InputError]) -> Any:
    name = TARGETS[kind]
    value = raw.get(name)
    if value is None:
        return None
    if kind == "binary" and (value not in (0, 1) or isinstance(value, float)):
        raise fail(f"must be 0, 1 or null, got {value!r}", name)
    if kind == "pointwise" and (isinstance(value, bool) or not isinstance(value, int)):
        raise fail(f"must be an integer or null, got {value!r}", name)
    if kind == "pairwise" and value not in ("a", "b"):
        raise fail(f'must be "a", "b" or null, got {value!r}', name)
    return value


def is_scores_file(path: str | Path) -> bool:
    """True when the first record looks like `ucsj score` output (has `z` and `criteria`)."""
    for _, first in read_json_lines(path):
        return isinstance(first, dict) and "z" in first and "criteria" in first
    return False
