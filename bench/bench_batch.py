"""What a batch round trip costs ucsj itself: collect N pending requests, import N answers.

    python bench/bench_batch.py [REQUESTS]   (default 1,000,000: 50,000 samples x 20 criteria)

Collect: `score --scoring per-criterion --cache collect` over an empty cache writes every
request to the pending file. The answers are then made here (not timed: that is the engine's
work) in the Batch API output format, and `cache import-batch` stores them. Finally the
collect run is repeated: every answer is now cached, so it writes the scores file. Each step
runs as the CLI in a fresh process, start-up included.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from fakeserver import Reply, completion_body  # noqa: E402

from bench import MODEL, criteria, write_samples  # noqa: E402


def ucsj(*args: str) -> tuple[int, float, float]:
    """Exit code, wall seconds and CPU seconds (user + system) of one CLI process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "ucsj", "-q", *args], check=False).returncode
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return code, wall, cpu


def answer(pending: Path, output: Path) -> int:
    """Every request answered "Yes" in the Batch API output format (the engine's part)."""
    count = 0
    with pending.open(encoding="utf-8") as lines, output.open("w", encoding="utf-8") as out:
        for n, text in enumerate(lines):
            request = json.loads(text)
            body = completion_body(request["body"], Reply(tokens=[(" Yes", {" Yes": 0.8})]))
            line = {
                "id": f"batch_req_{n}",
                "custom_id": request["custom_id"],
                "response": {"status_code": 200, "request_id": f"req_{n}", "body": body},
                "error": None,
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
            count += 1
    return count


def main(requests: int) -> dict:
    samples = requests // 20
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, crit = tmp / "data.jsonl", tmp / "criteria.json"
        write_samples(data, samples)
        criteria(4, 5).save(crit)
        common = ["--criteria", str(crit), "--scoring", "per-criterion", "--model", MODEL]
        common += ["--cache-dir", str(tmp / "cache"), "--base-url", "http://127.0.0.1:9/v1"]
        collect = ["--cache", "collect", "--pending", str(tmp / "pending.jsonl")]
        scores = str(tmp / "scores.jsonl")
        code, collect_s, collect_cpu = ucsj("score", str(data), *common, *collect, "-o", scores)
        assert code == 4, code
        pending_mb = (tmp / "pending.jsonl").stat().st_size / 1e6
        started = time.perf_counter()
        answered = answer(tmp / "pending.jsonl", tmp / "answers.jsonl")
        engine_stand_in_s = time.perf_counter() - started
        assert answered == requests, answered
        code, import_s, import_cpu = ucsj(
            "cache", "import-batch", str(tmp / "answers.jsonl"),
            "--requests", str(tmp / "pending.jsonl"), "--cache-dir", str(tmp / "cache"),
        )  # fmt: skip
        assert code == 0, code
        code, assemble_s, assemble_cpu = ucsj("score", str(data), *common, *collect, "-o", scores)
        assert code == 0, code
        with open(scores, encoding="utf-8") as written:
            lines = sum(1 for _ in written)
        assert lines == samples, lines
    row = {
        "requests": requests,
        "samples": samples,
        "pending_MB": round(pending_mb),
        "collect_s": round(collect_s, 1),
        "import_s": round(import_s, 1),
        "assemble_s": round(assemble_s, 1),
        "collect_cpu_s": round(collect_cpu, 1),
        "import_cpu_s": round(import_cpu, 1),
        "assemble_cpu_s": round(assemble_cpu, 1),
        "collect_us_per_request": round(1e6 * collect_s / requests, 1),
        "import_us_per_request": round(1e6 * import_s / requests, 1),
        "answers_made_here_s": round(engine_stand_in_s, 1),
    }
    print(row, flush=True)
    return row


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
