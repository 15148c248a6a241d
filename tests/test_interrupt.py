"""A `score` killed mid-run resumes from the cache: nothing cached is asked again, and the
output equals an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_dataset

from ucsj.llm import ResponseCache
from ucsj.llm.request import CACHE_SCHEMA, cache_key

CRITERIA = {
    "task": "rag-faithfulness",
    "concepts": [
        {
            "id": f"c{i}",
            "name": name,
            "questions": [
                {"id": f"c{i}.q1", "text": f"Does the answer satisfy {name.lower()} check 1?"}
            ],
        }
        for i, name in enumerate(("Attribution", "Fluency"), start=1)
    ],
}


def _score(tmp_path, server, cache, out):
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ucsj",
            "-q",
            "score",
            str(tmp_path / "d.jsonl"),
            "--criteria",
            str(tmp_path / "c.json"),
            "-o",
            str(out),
            "--cache-dir",
            str(cache),
            "--concurrency",
            "2",
            "--model",
            "judge-2025-01-01",
        ],
        env=env,
        stderr=subprocess.PIPE,
    )


def _wait_for(server, count):
    deadline = time.monotonic() + 60
    while server.count < count:
        assert time.monotonic() < deadline, "the scoring run never got going"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_score_resumes_without_asking_twice(tmp_path, sig):
    labels = write_dataset(tmp_path / "d.jsonl", "en", 40)
    (tmp_path / "c.json").write_text(json.dumps(CRITERIA))
    with FakeLLMServer(ScriptedJudge(labels), latency=0.02) as server:
        run = _score(tmp_path, server, tmp_path / "cache", tmp_path / "s.jsonl")
        _wait_for(server, 30)
        run.send_signal(sig)
        _, err = run.communicate(timeout=60)
        assert run.returncode == (-9 if sig == signal.SIGKILL else 130), err
        if sig == signal.SIGINT:
            assert b"rerun the same command to resume" in err
        assert not (tmp_path / "s.jsonl").exists(), "no partial output"
        with ResponseCache(tmp_path / "cache") as cache:
            cached = set(cache.keys())
            assert cache.verify() == [], "the cache survives the kill intact"
        assert 0 < len(cached) < 80
        sent_before = server.count

        rerun = _score(tmp_path, server, tmp_path / "cache", tmp_path / "s.jsonl")
        assert rerun.wait(timeout=120) == 0
        resent = [
            cache_key({"schema": CACHE_SCHEMA, **body}) for body in server.requests[sent_before:]
        ]
        assert not cached & set(resent), "a cached response was asked for again"
        assert len(cached) + len(resent) >= 80

        fresh = _score(tmp_path, server, tmp_path / "fresh-cache", tmp_path / "fresh.jsonl")
        assert fresh.wait(timeout=120) == 0
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "fresh.jsonl").read_bytes()
