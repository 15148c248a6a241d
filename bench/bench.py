"""ucsj benchmarks: ratios measured in one run (the machines are shared and noisy).

    python bench/bench.py [concurrency|capacity|process|replay|memory|tokens|sequential|all]

Results go to bench/RESULTS.md by hand, with the command that made them.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fakeserver import FakeLLMServer, Reply, answer_lines  # noqa: E402

from ucsj.criteria import build_criteria  # noqa: E402
from ucsj.data import SampleFile  # noqa: E402
from ucsj.llm import CacheMode, LLMSettings, ResponseCache  # noqa: E402
from ucsj.llm.cache import make_entry  # noqa: E402
from ucsj.scoring import plan_calls, score_file  # noqa: E402
from ucsj.tasks import load_task  # noqa: E402

TASK = load_task("rag-faithfulness")
MODEL = "bench-model-2025-01-01"


def write_samples(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            out.write(
                json.dumps(
                    {
                        "id": f"s{i}",
                        "lang": "en",
                        "label": i % 2,
                        "context": [
                            f"Passage {i} says the bridge opened in {1900 + i % 100}.",
                            "Another passage about rivers.",
                        ],
                        "query": f"When did bridge {i} open?",
                        "answer": f"It opened in {1900 + i % 97}.",
                    }
                )
                + "\n"
            )


def criteria(concepts: int, questions: int):
    return build_criteria(
        "rag-faithfulness",
        [
            (
                f"Concept {c}",
                "",
                [f"Is check {c}.{q} satisfied by the answer?" for q in range(questions)],
            )
            for c in range(concepts)
        ],
        {},
    )


def settings(base_url: str, cache: Path, concurrency: int = 8, mode=CacheMode.READWRITE):
    return LLMSettings(
        model=MODEL,
        base_url=base_url,
        cache_dir=cache,
        cache_mode=mode,
        concurrency=concurrency,
        timeout=30,
        max_retries=2,
    )


def yes_reply(body: dict) -> Reply:
    questions = body["messages"][-1]["content"].count("\nQ")
    return answer_lines([0.8] * max(questions, 1))


# 1. concurrency efficiency ---------------------------------------------------------------------


class ServerProcess:
    """The loopback server in its own process, so that its threads do not share the client's
    GIL (in-process, the server's Python work would be billed to the client)."""

    def __init__(self, latency: float, capacity: int | None = None, retry_after=None) -> None:
        code = (
            f"import sys, time; sys.path.insert(0, {str(ROOT / 'tests')!r}); "
            "sys.path.insert(0, {!r}); from bench import yes_reply; "
            "from fakeserver import FakeLLMServer\n"
            f"with FakeLLMServer(yes_reply, latency={latency}, capacity={capacity!r}, "
            f"capacity_retry_after={retry_after!r}) as s:\n"
            "    print(s.base_url, flush=True)\n"
            "    time.sleep(3600)"
        ).format(str(ROOT / "bench"))
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
        )
        self.base_url = self.process.stdout.readline().strip()

    def __enter__(self) -> ServerProcess:
        return self

    def cpu_seconds(self) -> float:
        """User + system CPU the server process has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait()


def bench_concurrency(latency: float = 0.1, seconds: float = 3.0) -> list[dict]:
    """Ideal time (requests x latency / concurrency) over measured wall time."""
    rows = []
    crit = criteria(1, 1)
    with ServerProcess(latency) as server:
        for conc in (1, 8, 32, 64):
            n = int(seconds / latency * conc)
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "d.jsonl"
                write_samples(data, n)
                before = resource.getrusage(resource.RUSAGE_SELF)
                server_before = server.cpu_seconds()
                started = time.perf_counter()
                score_file(
                    data,
                    crit,
                    TASK,
                    Path(tmp) / "s.jsonl",
                    settings(server.base_url, Path(tmp) / "c", conc),
                )
                wall = time.perf_counter() - started
                after = resource.getrusage(resource.RUSAGE_SELF)
                server_cpu = server.cpu_seconds() - server_before
            client_cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            ideal = n * latency / conc
            rows.append(
                {
                    "concurrency": conc,
                    "requests": n,
                    "wall_s": round(wall, 2),
                    "ideal_s": round(ideal, 2),
                    "efficiency": round(ideal / wall, 3),
                    "client_cpu_ms_per_request": round(1000 * client_cpu / n, 2),
                    "server_cpu_ms_per_request": round(1000 * server_cpu / n, 2),
                    # CPU both processes used, in cores, over the ideal time: above the
                    # machine's core count, the ideal time cannot be reached on it
                    "cores_needed_at_ideal": round((client_cpu + server_cpu) / ideal, 2),
                }
            )
            print(rows[-1], flush=True)
    return rows


def bench_capacity(latency: float = 0.1, capacity: int = 32, requests: int = 3600) -> list[dict]:
    """A server that answers `capacity` requests at once and refuses more with 429: a client
    asked for 4x that many in flight, against one that knows the limit. Efficiency = (answered
    x latency / capacity) / wall time; "lost" counts samples written with an error."""
    import httpx

    rows = []
    crit = criteria(4, 5)  # 20 per-criterion calls a sample
    for retry_after in (None, "1"):
        with ServerProcess(latency, capacity, retry_after) as server:
            for conc in (capacity, 4 * capacity) * 2:  # alternated: the machine is shared
                with tempfile.TemporaryDirectory() as tmp:
                    data = Path(tmp) / "d.jsonl"
                    write_samples(data, requests // 20)
                    before = httpx.get(server.base_url + "/stats").json()
                    run = settings(server.base_url, Path(tmp) / "c", conc)
                    run.max_retries = 5  # the CLI's default
                    started = time.perf_counter()
                    summary = score_file(
                        data, crit, TASK, Path(tmp) / "s.jsonl", run, scoring="per-criterion"
                    )
                    wall = time.perf_counter() - started
                    after = httpx.get(server.base_url + "/stats").json()
                answered = after["answered"] - before["answered"]
                ideal = answered * latency / capacity
                rows.append(
                    {
                        "retry_after": retry_after,
                        "concurrency_asked": conc,
                        "answered": answered,
                        "refused": after["refused"] - before["refused"],
                        "lost_samples": summary.failed,
                        "wall_s": round(wall, 2),
                        "ideal_s": round(ideal, 2),
                        "share_of_capacity": round(ideal / wall, 3),
                    }
                )
                print(rows[-1], flush=True)
    return rows


def bench_process(latency: float = 0.1, concurrency: int = 32, requests: int = 3600) -> dict:
    """The whole `ucsj score` process, start-up included, at `concurrency` in flight against a
    server with `latency`: ideal time (requests x latency / concurrency) over wall time."""
    with ServerProcess(latency) as server, tempfile.TemporaryDirectory() as tmp:
        data, crit = Path(tmp) / "d.jsonl", Path(tmp) / "criteria.json"
        write_samples(data, requests // 20)
        criteria(4, 5).save(crit)
        command = [sys.executable, "-m", "ucsj", "-q", "score", str(data), "--criteria", str(crit)]
        command += ["--scoring", "per-criterion", "--model", MODEL, "--base-url", server.base_url]
        command += ["--concurrency", str(concurrency), "--cache-dir", str(Path(tmp) / "c")]
        started = time.perf_counter()
        subprocess.run([*command, "-o", str(Path(tmp) / "s.jsonl")], check=True)
        wall = time.perf_counter() - started
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ucsj", "--version"], check=True, capture_output=True)
        start_up = time.perf_counter() - started
    ideal = requests * latency / concurrency
    row = {
        "requests": requests,
        "concurrency": concurrency,
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "efficiency": round(ideal / wall, 3),
        "ucsj_version_s": round(start_up, 2),
    }
    print(row, flush=True)
    return row


# 2. replay speed --------------------------------------------------------------------------------


def fill_cache(data: Path, crit, cache_dir: Path, scoring: str = "per-concept") -> int:
    """Record a response for every call without a server (the replay path is what is timed)."""
    count = 0
    with ResponseCache(cache_dir) as cache:
        for sample in SampleFile(data, TASK):
            for call in plan_calls(TASK, crit, sample, scoring, MODEL):
                body = {
                    "choices": [
                        {
                            "message": {
                                "content": "\n".join(
                                    f"Q{i}: Yes" for i in range(1, len(call.questions) + 1)
                                )
                            },
                            "finish_reason": "stop",
                        }
                    ],
                    "model": MODEL,
                    "usage": {},
                }
                cache.put(make_entry(call.request.key_material(), body, {}))
                count += 1
    return count


def stdlib_floor(data: Path, out: Path, crit) -> float:
    """Read each sample with json and write a record of the same size: the I/O floor."""
    started = time.perf_counter()
    z = {q.id: 1.0 for q in crit.questions}
    with data.open(encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        for line in src:
            record = json.loads(line)
            dst.write(
                json.dumps(
                    {
                        "id": record["id"],
                        "lang": record["lang"],
                        "z": z,
                        "s": {c.id: 1.0 for c in crit.concepts},
                        "answers": {c.id: "Q1: Yes" for c in crit.concepts},
                    }
                )
                + "\n"
            )
    return time.perf_counter() - started


def bench_replay(n: int = 10_000) -> dict:
    """The first run from a filled cache (every call rebuilt and read) and the rerun after it
    (lines from the record memo), each against the stdlib floor of the same run."""
    crit = criteria(4, 5)  # 20 criteria
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "d.jsonl"
        write_samples(data, n)
        entries = fill_cache(data, crit, tmp / "c")
        floor = stdlib_floor(data, tmp / "floor.jsonl", crit)
        timings = []
        for run in ("first", "rerun"):
            started = time.perf_counter()
            score_file(
                data,
                crit,
                TASK,
                tmp / f"s.{run}.jsonl",
                settings("http://127.0.0.1:9/v1", tmp / "c", mode=CacheMode.REPLAY),
            )
            timings.append(time.perf_counter() - started)
        same = (tmp / "s.first.jsonl").read_bytes() == (tmp / "s.rerun.jsonl").read_bytes()
    row = {
        "samples": n,
        "criteria": 20,
        "cache_entries": entries,
        "first_s": round(timings[0], 2),
        "rerun_s": round(timings[1], 2),
        "stdlib_floor_s": round(floor, 2),
        "first_ratio": round(timings[0] / floor, 2),
        "rerun_ratio": round(timings[1] / floor, 2),
        "identical_bytes": same,
    }
    print(row, flush=True)
    return row


# 3. memory ---------------------------------------------------------------------------------------


def _peak_rss_child(n: int) -> int:
    code = f"""
import sys, resource
# numpy in both runs: validation imports it only above 65,536 samples, and the ratio is about
# growth with the file, not about a library's fixed 19 MB being loaded in one run only
import numpy
sys.path.insert(0, {str(ROOT / "bench")!r})
from bench import *
from pathlib import Path
import tempfile
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp); data = tmp / "d.jsonl"; write_samples(data, {n}); crit = criteria(1, 1)
    fill_cache(data, crit, tmp / "c")
    for run in ("first", "rerun"):  # the first fills the record memo, the rerun reads it
        score_file(data, crit, TASK, tmp / "s.jsonl",
                   settings("http://127.0.0.1:9/v1", tmp / "c", mode=CacheMode.REPLAY))
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def bench_memory() -> dict:
    small, large = _peak_rss_child(1_000), _peak_rss_child(100_000)
    row = {"peak_rss_kb_1k": small, "peak_rss_kb_100k": large, "ratio": round(large / small, 3)}
    print(row, flush=True)
    return row


# 4. prompt tokens --------------------------------------------------------------------------------


def bench_tokens() -> list[dict]:
    """Prompt size per sample per granularity (characters / 4 as tokens), the share a prefix
    cache can reuse (all but the first call's shared prefix), and the floor (the sample once
    plus each question once)."""
    from ucsj.prompts import sample_block

    crit = criteria(4, 5)
    rows = []
    samples = list(SampleFile(ROOT / "fixtures" / "demo" / "en.jsonl", TASK))
    for scoring in ("joint", "per-concept", "per-criterion"):
        sent = reusable = floor = 0
        for sample in samples:
            calls = plan_calls(TASK, crit, sample, scoring, MODEL)
            prompts = ["".join(m for _, m in c.request.messages) for c in calls]
            prefix = _common_prefix(prompts) if len(prompts) > 1 else ""
            sent += sum(len(p) for p in prompts)
            reusable += len(prefix) * (len(prompts) - 1)
            floor += len(sample_block(TASK, sample)) + sum(len(q.text) for q in crit.questions)
        k = len(samples) * 4
        rows.append(
            {
                "scoring": scoring,
                "calls_per_sample": len(calls),
                "prompt_tokens_per_sample": round(sent / k),
                "prefix_reusable_share": round(reusable / sent, 3),
                "after_prefix_cache_tokens": round((sent - reusable) / k),
                "floor_tokens": round(floor / k),
            }
        )
        print(rows[-1], flush=True)
    return rows


def _common_prefix(texts: list[str]) -> str:
    first = min(texts)
    last = max(texts)
    i = 0
    while i < len(first) and first[i] == last[i]:
        i += 1
    return first[:i]


# 6. against a plain sequential loop --------------------------------------------------------------


def bench_sequential(n: int = 40, latency: float = 0.05) -> dict:
    """The calling pattern of reference implementations: one request at a time, no cache."""
    import httpx

    crit = criteria(4, 5)
    with FakeLLMServer(yes_reply, latency=latency) as server, tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "d.jsonl"
        write_samples(data, n)
        started = time.perf_counter()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            for sample in SampleFile(data, TASK):
                for call in plan_calls(TASK, crit, sample, "per-concept", MODEL):
                    client.post("/chat/completions", json=call.request.body()).json()
        sequential = time.perf_counter() - started
        started = time.perf_counter()
        score_file(data, crit, TASK, tmp / "s.jsonl", settings(server.base_url, tmp / "c", 8))
        ucsj_first = time.perf_counter() - started
        started = time.perf_counter()
        score_file(data, crit, TASK, tmp / "s.jsonl", settings(server.base_url, tmp / "c", 8))
        ucsj_rerun = time.perf_counter() - started
    row = {
        "samples": n,
        "calls": n * 4,
        "latency_s": latency,
        "sequential_s": round(sequential, 2),
        "ucsj_c8_s": round(ucsj_first, 2),
        "speedup": round(sequential / ucsj_first, 1),
        "ucsj_rerun_s": round(ucsj_rerun, 2),
    }
    print(row, flush=True)
    return row


BENCHES = {
    "concurrency": bench_concurrency,
    "capacity": bench_capacity,
    "process": bench_process,
    "replay": bench_replay,
    "memory": bench_memory,
    "tokens": bench_tokens,
    "sequential": bench_sequential,
}

if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    for name, bench in BENCHES.items():
        if which in (name, "all"):
            print(f"== {name}", flush=True)
            bench()
