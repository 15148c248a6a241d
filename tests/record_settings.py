"""Re-record fixtures/pointwise/ and fixtures/pairwise/: synthetic translation ratings and
chat preferences, and the scripted judge's answers to gen, score and CE-Judge.

    python tests/record_settings.py

Runs the commands for real through the loopback server, then exports each cache.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT, ucsj
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_pairs, write_translations

MODEL = "scripted-judge-2025-01-01"
SIZES = {"en": 32, "de": 24, "fr": 24}
TARGETS = ("de", "fr")  # the baselines are recorded on the target languages only
METHODS = ("zero-shot", "ce-judge")  # the baselines that judge scores and preferences
SETTINGS = {
    "pointwise": ("literary-translation", write_translations),
    "pairwise": ("multilingual-chat", write_pairs),
}


def record(setting: str) -> None:
    task, write = SETTINGS[setting]
    target = ROOT / "fixtures" / setting
    target.mkdir(parents=True, exist_ok=True)
    quality: dict[str, float] = {}
    for lang, n in SIZES.items():
        quality |= write(target / f"{lang}.jsonl", lang, n)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(ScriptedJudge(quality)) as server:
        common = ["--base-url", server.base_url, "--cache-dir", tmp, "--model", MODEL]
        criteria = f"{tmp}/criteria.json"
        assert ucsj("gen", "--task", task, "-o", criteria, *common) == 0
        for lang in SIZES:
            data = str(target / f"{lang}.jsonl")
            assert ucsj("score", data, "--criteria", criteria, "-o", f"{tmp}/s.jsonl", *common) == 0
            for method in METHODS if lang in TARGETS else ():
                judged = ["--method", method, "--task", task, "-o", f"{tmp}/p.jsonl"]
                assert ucsj("judge", data, *judged, *common) == 0
        assert (
            ucsj("cache", "export", "-o", str(target / "responses.jsonl"), "--cache-dir", tmp) == 0
        )


if __name__ == "__main__":
    for name in SETTINGS:
        record(name)
