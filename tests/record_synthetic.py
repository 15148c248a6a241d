"""Re-record fixtures/synthetic/: the synthetic data set and the scripted judge's responses.

    python tests/record_synthetic.py

Runs gen and score for real through the loopback server, then exports the cache.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT, ucsj
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_dataset

FIXTURES = ROOT / "fixtures" / "synthetic"
MODEL = "scripted-judge-2025-01-01"
SIZES = {"en": 24, "fr": 20, "es": 20}


def record(target: Path = FIXTURES) -> None:
    target.mkdir(parents=True, exist_ok=True)
    labels = {}
    for lang, n in SIZES.items():
        labels |= write_dataset(target / f"{lang}.jsonl", lang, n)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(ScriptedJudge(labels)) as server:
        common = ["--base-url", server.base_url, "--cache-dir", tmp, "--model", MODEL]
        assert ucsj("gen", "--task", "rag-faithfulness", "-o", f"{tmp}/c.json", *common) == 0
        for lang in SIZES:
            assert (
                ucsj(
                    "score",
                    str(target / f"{lang}.jsonl"),
                    "--criteria",
                    f"{tmp}/c.json",
                    "-o",
                    f"{tmp}/{lang}.scores.jsonl",
                    *common,
                )
                == 0
            )
        assert (
            ucsj("cache", "export", "-o", str(target / "responses.jsonl"), "--cache-dir", tmp) == 0
        )


if __name__ == "__main__":
    record()
