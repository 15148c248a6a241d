"""Faults during a run: failures are listed with their reason, never cached, counted by report
and gated; several processes share one cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ucsj
from fakeserver import FakeLLMServer, Fault, Reply, answer_lines
from synth import ScriptedJudge, write_dataset

from ucsj.llm import ResponseCache

CRITERIA = {
    "task": "rag-faithfulness",
    "concepts": [
        {
            "id": "c1",
            "name": "Attribution",
            "questions": [{"id": "c1.q1", "text": "Does the answer satisfy attribution check 1?"}],
        }
    ],
}


def test_failed_samples_are_listed_counted_and_gated(tmp_path, capsys):
    labels = write_dataset(tmp_path / "en.jsonl", "en", 20)
    (tmp_path / "c.json").write_text(json.dumps(CRITERIA))
    judge = ScriptedJudge(labels | write_dataset(tmp_path / "fr.jsonl", "fr", 10))
    common = [
        "--criteria",
        str(tmp_path / "c.json"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--max-retries",
        "0",
        "--concurrency",
        "1",
    ]
    with FakeLLMServer(judge) as server:
        live = ["--base-url", server.base_url]
        assert (
            ucsj(
                "score",
                str(tmp_path / "en.jsonl"),
                "-o",
                str(tmp_path / "en.s.jsonl"),
                *common,
                *live,
            )
            == 0
        )
        server.queue(
            "500", Fault("400", body='{"error": {"message": "refused: policy"}}'), "malformed"
        )
        code = ucsj(
            "score",
            str(tmp_path / "fr.jsonl"),
            "-o",
            str(tmp_path / "fr.s.jsonl"),
            *common,
            *live,
        )
    err = capsys.readouterr().err
    assert code == 3 and "3 of 10 samples could not be scored" in err
    rows = [json.loads(x) for x in (tmp_path / "fr.s.jsonl").read_text().splitlines()]
    failed = {r["id"]: r["error"] for r in rows if "error" in r}
    assert list(failed) == ["fr-000", "fr-001", "fr-002"]
    assert "HTTP 500" in failed["fr-000"] and "refused: policy" in failed["fr-001"]
    assert "malformed" in failed["fr-002"]
    with ResponseCache(tmp_path / "cache") as cache:
        assert len(cache) == 27, "20 en + 7 fr: no failure was cached"

    assert (
        ucsj(
            "fit",
            "--train",
            str(tmp_path / "en.s.jsonl"),
            "--criteria",
            str(tmp_path / "c.json"),
            "--module",
            "logreg",
            "-o",
            str(tmp_path / "j.skops"),
        )
        == 0
    )
    assert (
        ucsj(
            "predict",
            str(tmp_path / "fr.s.jsonl"),
            "--judge",
            str(tmp_path / "j.skops"),
            "-o",
            str(tmp_path / "fr.p.jsonl"),
        )
        == 0
    )
    assert (
        ucsj(
            "report",
            str(tmp_path / "fr.p.jsonl"),
            "--json",
            str(tmp_path / "r.json"),
            "--max-error-rate",
            "0.1",
        )
        == 1
    )
    assert "gate FAILED: error_rate<=0.1" in capsys.readouterr().err
    fr = json.loads((tmp_path / "r.json").read_text())["methods"]["ucs-logreg"]["fr"]
    assert fr["error_rate"] == 0.3


def test_wrong_format_answers_are_unreadable_not_failures(tmp_path, capsys):
    row = {"id": "a", "lang": "en", "context": "P.", "query": "Q?", "answer": "A.", "label": 1}
    (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "c.json").write_text(json.dumps(CRITERIA))
    with FakeLLMServer(lambda body: Reply(text="I'm sorry, I can't help with that.")) as server:
        code = ucsj(
            "score",
            str(tmp_path / "d.jsonl"),
            "--criteria",
            str(tmp_path / "c.json"),
            "-o",
            str(tmp_path / "s.jsonl"),
            "--base-url",
            server.base_url,
            "--cache-dir",
            str(tmp_path / "cache"),
        )
    # nothing readable at all: a runtime error with its reason, the answers kept to look at
    assert code == 3
    err = capsys.readouterr().err
    assert "none of the 1 answers could be read" in err and "--scoring per-criterion" in err
    scores = json.loads((tmp_path / "s.jsonl").read_text())
    assert scores["z"] == {"c1.q1": None} and "error" not in scores


def test_many_unreadable_answers_warn_with_the_share_and_a_hint(tmp_path, capsys):
    rows = [
        {"id": str(i), "lang": "en", "context": "P.", "query": "Q?", "answer": f"A{i}.", "label": 1}
        for i in range(4)
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "c.json").write_text(json.dumps(CRITERIA))

    def reply(body):  # answers A0 and A1 in the right format, the others not
        text = json.dumps(body)
        return answer_lines([1.0]) if "A0." in text or "A1." in text else Reply(text="Sure!")

    args = ["--criteria", str(tmp_path / "c.json"), "--cache-dir", str(tmp_path / "cache")]
    with FakeLLMServer(reply) as server:
        out = str(tmp_path / "s.jsonl")
        code = ucsj(
            "score", str(tmp_path / "d.jsonl"), *args, "-o", out, "--base-url", server.base_url
        )
    assert code == 0
    err = capsys.readouterr().err
    assert "50% of the answers (2 of 4) could not be read" in err
    assert "--scoring per-criterion" in err


def test_processes_scoring_different_files_share_one_cache(tmp_path):
    with FakeLLMServer(lambda body: answer_lines([0.7])) as server:
        (tmp_path / "c.json").write_text(json.dumps(CRITERIA))
        procs = []
        for lang in ("en", "fr", "de"):
            write_dataset(tmp_path / f"{lang}.jsonl", lang, 60)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "ucsj",
                        "-q",
                        "score",
                        str(tmp_path / f"{lang}.jsonl"),
                        "--criteria",
                        str(tmp_path / "c.json"),
                        "-o",
                        str(tmp_path / f"{lang}.s.jsonl"),
                        "--cache-dir",
                        str(tmp_path / "cache"),
                        "--base-url",
                        server.base_url,
                    ],
                    stderr=subprocess.PIPE,
                    env={**os.environ},
                )
            )
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()
    assert ucsj("cache", "verify", "--cache-dir", str(tmp_path / "cache")) == 0
    with ResponseCache(tmp_path / "cache") as cache:
        assert len(cache) == 180
