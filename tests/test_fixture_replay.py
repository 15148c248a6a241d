"""The whole chain from committed fixtures: a cache seeded from fixtures/, replayed offline."""

from __future__ import annotations

import json

from conftest import ROOT, ucsj
from record_synthetic import MODEL

FIXTURES = ROOT / "fixtures" / "synthetic"


def test_chain_replays_from_fixtures(tmp_path):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert ucsj("cache", "import", str(FIXTURES / "responses.jsonl"), *cache) == 0
    offline = ["--cache", "replay", "--base-url", "http://127.0.0.1:9/v1", "--model", MODEL, *cache]
    criteria = str(tmp_path / "criteria.json")
    assert ucsj("gen", "--task", "rag-faithfulness", "-o", criteria, *offline) == 0
    for lang in ("en", "fr", "es"):
        assert (
            ucsj(
                "score",
                str(FIXTURES / f"{lang}.jsonl"),
                "--criteria",
                criteria,
                "-o",
                str(tmp_path / f"{lang}.scores.jsonl"),
                *offline,
            )
            == 0
        )
    judge = str(tmp_path / "judge.skops")
    assert (
        ucsj(
            "fit", "--train", str(tmp_path / "en.scores.jsonl"), "--criteria", criteria, "-o", judge
        )
        == 0
    )
    preds = []
    for lang in ("fr", "es"):
        preds.append(str(tmp_path / f"{lang}.preds.jsonl"))
        assert (
            ucsj(
                "predict", str(tmp_path / f"{lang}.scores.jsonl"), "--judge", judge, "-o", preds[-1]
            )
            == 0
        )
    report = tmp_path / "report.json"
    assert ucsj("report", *preds, "--json", str(report), "--gate", "ba>=0.9") == 0
    result = json.loads(report.read_text())
    (method,) = result["methods"]
    assert {lang: result["methods"][method][lang]["n"] for lang in ("fr", "es")} == {
        "fr": 20,
        "es": 20,
    }
    assert result["passed"] is True
