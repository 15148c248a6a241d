"""Benchmark converters."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA, ucsj

MEMERAG = SHARED_DATA / "memerag" / "memerag"
# Labelled sentence counts from ../shared/data/memerag/README.md ("Challenging" dropped).
MEMERAG_COUNTS = {
    "en": (261, 126),
    "de": (333, 125),
    "es": (370, 185),
    "fr": (335, 204),
    "hi": (259, 90),
}


@pytest.mark.skipif(
    not MEMERAG.is_dir(),
    reason="MEMERAG data is not in ../shared/data/memerag "
    "(research-only licence: it is read from there, never copied)",
)
@pytest.mark.parametrize("lang", sorted(MEMERAG_COUNTS))
def test_memerag_counts_match_its_readme(tmp_path, lang):
    out = tmp_path / f"{lang}.jsonl"
    assert ucsj("convert", "memerag", str(MEMERAG / f"{lang}.jsonl"), "-o", str(out)) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    supported, not_supported = MEMERAG_COUNTS[lang]
    assert sum(r["label"] == 1 for r in rows) == supported
    assert sum(r["label"] == 0 for r in rows) == not_supported
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(r["lang"] == lang and len(r["context"]) == 5 for r in rows)
    # the output is valid input for the rag-faithfulness task
    from ucsj.data import SampleFile
    from ucsj.tasks import load_task

    summary = SampleFile(out, load_task("rag-faithfulness")).validate()
    assert summary.count == supported + not_supported


def test_mface_csv_with_binarisation_rule(tmp_path):
    raw = tmp_path / "mface.csv"
    raw.write_text(
        "id,doc_id,lang,split,input,summary,system,q1_avg,q2_min,q2_avg,q2_max\n"
        "1,d1,french,test,Un article.,Un résumé.,human,1,1,1,1\n"
        "2,d2,french,test,Un autre article.,Faux.,mt5,1,0,0.33,1\n"
        "3,d3,th,test,บทความ,สรุป,mt5,1,0,0.67,1\n"
        "4,d4,thai,test,บทความ,สรุป,mt5,1,,,\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert ucsj("convert", "mface", str(raw), "-o", str(out)) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["lang"], r["label"]) for r in rows] == [
        ("fr-1", "fr", 1),
        ("fr-2", "fr", 0),
        ("th-3", "th", 1),
    ]
    assert rows[0]["article"] == "Un article." and rows[0]["summary"] == "Un résumé."
    assert (
        ucsj("convert", "mface", str(raw), "--rule", "min", "--threshold", "1", "-o", str(out)) == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in rows] == [1, 0, 0]


def test_mface_unknown_language_names_the_row(tmp_path, capsys):
    raw = tmp_path / "bad.csv"
    raw.write_text("id,lang,input,summary,q2_avg\n1,klingon,a,b,1\n", encoding="utf-8")
    assert ucsj("convert", "mface", str(raw), "-o", str(tmp_path / "o.jsonl")) == 2
    assert "bad.csv:2 field 'lang'" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()
