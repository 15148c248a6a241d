"""examples/ray_batch.py on a local Ray instance against two loopback chat servers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import ROOT, ucsj
from fakeserver import FakeLLMServer, Fault
from synth import ScriptedJudge, write_dataset

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'ucsj[ray]')")
pytestmark = pytest.mark.timeout(600)  # a local Ray instance starts in 10-60 s on a busy machine


def _example():
    spec = importlib.util.spec_from_file_location("ray_batch", ROOT / "examples" / "ray_batch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_answers_a_pending_file_over_two_endpoints(local_ray, tmp_path: Path):
    example = _example()
    labels = write_dataset(tmp_path / "en.jsonl", "en", 16)
    criteria = {
        "task": "rag-faithfulness",
        "concepts": [
            {
                "id": "c1",
                "name": "Attribution",
                "questions": [
                    {"id": "c1.q1", "text": "Does the answer satisfy attribution check 1?"}
                ],
            }
        ],
    }
    (tmp_path / "criteria.json").write_text(json.dumps(criteria))
    score = ["score", str(tmp_path / "en.jsonl"), "--criteria", str(tmp_path / "criteria.json")]
    score += ["--model", "judge-2025-01-01"]
    collect = ["--cache", "collect", "--pending", str(tmp_path / "pending.jsonl")]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    out = ["-o", str(tmp_path / "scores.jsonl")]
    assert ucsj(*score, *collect, *cache, *out) == 4
    with FakeLLMServer(ScriptedJudge(labels)) as one, FakeLLMServer(ScriptedJudge(labels)) as two:
        one.queue(Fault("503"))  # retried by the worker, not written as a failure
        count = example.run(
            tmp_path / "pending.jsonl",
            tmp_path / "answers.jsonl",
            [one.base_url, two.base_url],
            workers=2,
            threads=4,
            retries=3,
            batch_size=4,
        )
        assert count == 16
        assert one.count > 1 and two.count > 1  # both endpoints answered
        assert one.count + two.count == 16 + 1
        direct = ["--base-url", one.base_url, "--cache-dir", str(tmp_path / "direct-cache")]
        assert ucsj(*score, *direct, "-o", str(tmp_path / "direct.jsonl")) == 0
    lines = [json.loads(t) for t in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert all(line["response"]["status_code"] == 200 for line in lines)
    imported = ["--requests", str(tmp_path / "pending.jsonl"), *cache]
    assert ucsj("cache", "import-batch", str(tmp_path / "answers.jsonl"), *imported) == 0
    assert ucsj(*score, *collect, *cache, *out) == 0
    assert (tmp_path / "scores.jsonl").read_bytes() == (tmp_path / "direct.jsonl").read_bytes()


def test_an_unreachable_endpoint_is_written_as_an_error_not_dropped(local_ray, tmp_path: Path):
    example = _example()
    pending = tmp_path / "pending.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    pending.write_text(
        json.dumps(
            {"custom_id": "k1", "method": "POST", "url": "/v1/chat/completions", "body": body}
        )
        + "\n"
    )
    count = example.run(
        pending, tmp_path / "answers.jsonl", ["http://127.0.0.1:9/v1"], workers=1, retries=0
    )
    assert count == 1
    (line,) = [json.loads(t) for t in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert line["custom_id"] == "k1" and line["response"] is None
    assert line["error"]["code"] == "request_failed"
