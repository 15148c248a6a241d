"""The record memo: a rerun writes the same bytes without rebuilding or reading any call, and
anything that can change a recorded response (refresh, import, clear) is seen by the next run.
Also: when two processes record the same request, the first recording wins for both."""

from __future__ import annotations

import json
import sqlite3

from conftest import run_complete, ucsj
from fakeserver import FakeLLMServer, Reply, answer_lines
from test_scoring import CRITERIA

from ucsj.llm import ChatRequest, ResponseCache
from ucsj.llm.cache import make_entry
from ucsj.llm.record_memo import RecordMemo


def write_inputs(tmp_path, n: int = 6) -> None:
    (tmp_path / "c.json").write_text(json.dumps(CRITERIA))
    with (tmp_path / "d.jsonl").open("w") as out:
        for i in range(n):
            record = {"id": f"s{i}", "lang": "fr", "context": f"Texte {i}.", "query": "Q?"}
            out.write(json.dumps({**record, "answer": f"Réponse {i}.", "label": i % 2}) + "\n")


def score(tmp_path, out: str, *options: str) -> bytes:
    args = ["score", str(tmp_path / "d.jsonl"), "--criteria", str(tmp_path / "c.json")]
    assert (
        ucsj(*args, "-o", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), *options)
        == 0
    )
    return (tmp_path / out).read_bytes()


def z_values(data: bytes) -> list[float]:
    return [v for line in data.decode().splitlines() for v in json.loads(line)["z"].values()]


def test_rerun_comes_from_the_memo_byte_for_byte(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.2])) as server:
        first = score(tmp_path, "a.jsonl", "--base-url", server.base_url)
    with RecordMemo(tmp_path / "cache") as memo:
        assert len(memo) == 6
    capsys.readouterr()
    assert ucsj("cache", "stats", "--cache-dir", str(tmp_path / "cache")) == 0
    assert "record memo: 6 scores lines" in capsys.readouterr().out

    def no_reads(*_):
        raise AssertionError("a memoised rerun reads no cached response")

    monkeypatch.setattr(ResponseCache, "get", no_reads)
    offline = ["--cache", "replay", "--base-url", "http://127.0.0.1:9/v1"]
    assert score(tmp_path, "b.jsonl", *offline) == first


def test_a_line_whose_response_left_the_cache_is_computed_again(tmp_path):
    """One deleted cache entry: only the line computed from it misses the memo (the batch's
    other lines still come from it)."""
    write_inputs(tmp_path)
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.9])) as server:
        before = score(tmp_path, "a.jsonl", "--base-url", server.base_url)
    with ResponseCache(tmp_path / "cache") as cache:
        gone = cache.keys()[0]
        cache._store.delete(gone)
    with FakeLLMServer(lambda body: answer_lines([0.1, 0.1])) as server:
        after = score(tmp_path, "b.jsonl", "--base-url", server.base_url)
        assert server.count == 1  # the one call whose response was deleted
    old, new = before.decode().splitlines(), after.decode().splitlines()
    changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    assert len(changed) == 1
    assert gone in json.loads(new[changed[0]])["keys"].values()
    assert set(json.loads(new[changed[0]])["z"].values()) == {0.1, 0.9}  # one call re-asked


def test_a_refresh_is_seen_by_the_next_run(tmp_path):
    write_inputs(tmp_path)
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.9])) as server:
        before = score(tmp_path, "a.jsonl", "--base-url", server.base_url)
    with FakeLLMServer(lambda body: answer_lines([0.1, 0.1])) as server:
        refreshed = score(tmp_path, "b.jsonl", "--base-url", server.base_url, "--cache", "refresh")
    after = score(tmp_path, "c.jsonl", "--cache", "replay", "--base-url", "http://127.0.0.1:9/v1")
    assert set(z_values(before)) == {0.9} and set(z_values(refreshed)) == {0.1}
    assert after == refreshed  # not the memoised lines of the first run


def test_import_and_clear_are_seen_by_the_next_run(tmp_path):
    write_inputs(tmp_path, 2)
    offline = ["--cache", "replay", "--base-url", "http://127.0.0.1:9/v1"]
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.9])) as server:
        score(tmp_path, "a.jsonl", "--base-url", server.base_url)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert ucsj("cache", "export", "-o", str(tmp_path / "x.jsonl"), *cache) == 0
    changed = []
    for line in (tmp_path / "x.jsonl").read_text().splitlines():
        entry = json.loads(line)
        entry["response"]["choices"][0]["message"]["content"] = "Q1: No\nQ2: No"
        entry["response"]["choices"][0].pop("logprobs", None)
        changed.append(json.dumps(make_entry(entry["request"], entry["response"], {})))
    (tmp_path / "x.jsonl").write_text("\n".join(changed) + "\n")
    assert ucsj("cache", "import", str(tmp_path / "x.jsonl"), *cache) == 0
    assert set(z_values(score(tmp_path, "b.jsonl", *offline))) == {0.0}
    assert ucsj("cache", "clear", "--yes", *cache) == 0
    args = ["score", str(tmp_path / "d.jsonl"), "--criteria", str(tmp_path / "c.json")]
    assert ucsj(*args, "-o", str(tmp_path / "c.jsonl"), *cache, *offline) == 3  # a miss


def test_failed_samples_are_not_memoised_and_criteria_edits_change_keys(tmp_path):
    write_inputs(tmp_path, 3)
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.9])) as server:
        server.queue("400")
        args = ["score", str(tmp_path / "d.jsonl"), "--criteria", str(tmp_path / "c.json")]
        cache = ["--cache-dir", str(tmp_path / "cache"), "--max-retries", "0"]
        live = ["--base-url", server.base_url, "--concurrency", "1"]
        assert ucsj(*args, "-o", str(tmp_path / "a.jsonl"), *cache, *live) == 3
        with RecordMemo(tmp_path / "cache") as memo:
            assert len(memo) == 2  # the failed sample is retried next time, not replayed
        score(tmp_path, "b.jsonl", *live)
        assert "error" not in (tmp_path / "b.jsonl").read_text()
    # "yes_means" is outside the fingerprint but changes the values: it changes the memo key
    criteria = json.loads((tmp_path / "c.json").read_text())
    criteria["concepts"][0]["questions"][0]["yes_means"] = "bad"
    (tmp_path / "c.json").write_text(json.dumps(criteria))
    flipped = score(tmp_path, "c.jsonl", "--cache", "replay", "--base-url", "http://127.0.0.1:9/v1")
    assert sorted(set(z_values(flipped))) == [0.1, 0.9]


def test_the_first_recording_of_a_request_wins(make_settings):
    """Another process records the request while this one waits for its answer: this one
    uses the recorded answer, so its output agrees with the cache."""
    request = ChatRequest.chat("m-2024-01-01", [("user", "Is it?")], max_tokens=4)
    with FakeLLMServer() as server:
        settings = make_settings(server.base_url)

        def record_first_then_answer(body: dict) -> Reply:
            with ResponseCache(settings.cache_dir) as other:
                payload = {"choices": [{"message": {"content": "No"}, "finish_reason": "stop"}]}
                other.put(make_entry(request.key_material(), payload, {}))
            return Reply(text="Yes")

        server.state.responder = record_first_then_answer
        (completion,), _ = run_complete(settings, request)
    assert completion.text == "No"
    with ResponseCache(settings.cache_dir) as cache:
        assert cache.get(request.key)["response"]["choices"][0]["message"]["content"] == "No"


def test_a_memo_that_cannot_be_written_only_costs_speed(tmp_path, monkeypatch):
    write_inputs(tmp_path, 3)
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.2])) as server:
        first = score(tmp_path, "a.jsonl", "--base-url", server.base_url, "--cache", "off")

        monkeypatch.setattr(RecordMemo, "_transaction", lambda self: _Raising())
        assert score(tmp_path, "b.jsonl", "--base-url", server.base_url) == first
    with RecordMemo(tmp_path / "cache") as memo:
        assert len(memo) == 0  # nothing memoised, nothing lost


class _Raising:
    def __enter__(self):
        raise sqlite3.OperationalError("database or disk is full")

    def __exit__(self, *exc):
        return False
