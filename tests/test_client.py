"""The client over real HTTP to the loopback server: retries, cache, replay, logprobs, secrets."""

from __future__ import annotations

import email.utils
import math
import time
from datetime import UTC, datetime, timedelta

import pytest
from conftest import run_complete
from fakeserver import FakeLLMServer, Fault, Reply, answer_lines

from ucsj.errors import CacheMissError
from ucsj.llm import CacheMode, ChatRequest, ResponseCache
from ucsj.llm.client import RequestFailed, UnusableResponse, environment_proxy


def req(text: str = "Is the sky blue?", **params) -> ChatRequest:
    params.setdefault("max_tokens", 8)
    return ChatRequest.chat("test-model-2024-01-01", [{"role": "user", "content": text}], **params)


def test_completion_reads_text_and_top_logprobs(make_settings):
    with FakeLLMServer(lambda body: answer_lines([0.8, 0.25])) as srv:
        [completion], _ = run_complete(make_settings(srv.base_url), req())
    assert completion.text == "Q1: Yes\nQ2: No"
    answer = [t for t in completion.tokens if t.token in (" Yes", " No")]
    assert [a.token for a in answer] == [" Yes", " No"]
    assert dict(answer[0].top)[" Yes"] == pytest.approx(math.log(0.8))
    assert dict(answer[1].top)[" Yes"] == pytest.approx(math.log(0.25))
    body = srv.requests[0]
    assert body["temperature"] == 0 and body["top_p"] == 1 and body["seed"] == 42
    assert body["logprobs"] is True and body["top_logprobs"] == 5 and body["max_tokens"] == 8


def test_second_run_is_served_from_cache(server, make_settings):
    settings = make_settings(server.base_url)
    first, stats1 = run_complete(settings, req("a"), req("b"))
    assert server.count == 2 and stats1.cache_writes == 2
    second, stats2 = run_complete(settings, req("a"), req("b"))
    assert server.count == 2, "a rerun must send no request"
    assert stats2.cache_hits == 2 and [c.text for c in second] == [c.text for c in first]


def test_replay_makes_no_request_and_names_a_miss(server, make_settings):
    run_complete(make_settings(server.base_url), req("recorded"))
    assert server.count == 1
    replay = make_settings("http://127.0.0.1:9/v1", cache_mode=CacheMode.REPLAY)
    [hit], _ = run_complete(replay, req("recorded"))
    assert hit.text == "Yes"
    [miss], stats = run_complete(replay, req("never recorded"))
    assert isinstance(miss, CacheMissError)
    assert "never recorded" in str(miss) and "test-model-2024-01-01" in str(miss)
    assert server.count == 1 and stats.requests_sent == 0


def test_429_honours_retry_after_seconds(server, make_settings):
    server.queue(Fault("429", retry_after="1"))
    started = time.monotonic()
    [completion], stats = run_complete(make_settings(server.base_url), req())
    elapsed = time.monotonic() - started
    assert completion.text == "Yes" and server.count == 2 and stats.retries == 1
    assert elapsed >= 0.9, "Retry-After: 1 must be waited out"


def test_retry_after_as_http_date(server, make_settings):
    when = datetime.now(UTC) + timedelta(seconds=2)
    server.queue(Fault("503", retry_after=email.utils.format_datetime(when, usegmt=True)))
    started = time.monotonic()
    [completion], _ = run_complete(make_settings(server.base_url), req())
    assert completion.text == "Yes" and server.count == 2
    assert time.monotonic() - started >= 0.5


@pytest.mark.parametrize(
    "fault", ["500", "502", "503", "408", "malformed", "empty_choices", "reset"]
)
def test_transient_faults_are_retried(server, make_settings, fault):
    server.queue(fault, fault)
    [completion], stats = run_complete(make_settings(server.base_url), req())
    assert completion.text == "Yes" and server.count == 3 and stats.retries == 2


def test_hang_times_out_and_retries(server, make_settings):
    server.queue("hang")
    [completion], stats = run_complete(make_settings(server.base_url, timeout=0.5), req())
    assert completion.text == "Yes" and stats.retries == 1


def test_errors_are_never_cached(server, make_settings, tmp_path):
    settings = make_settings(server.base_url, max_retries=1)
    server.queue("500", "500")
    [failure], stats = run_complete(settings, req())
    assert isinstance(failure, RequestFailed) and "HTTP 500" in str(failure)
    assert stats.failures == 1
    with ResponseCache(settings.cache_dir) as cache:
        assert len(cache) == 0
    [completion], _ = run_complete(settings, req())  # the next run asks again, and succeeds
    assert completion.text == "Yes" and server.count == 3


def test_client_error_is_not_retried(server, make_settings):
    server.queue(Fault("401", body='{"error": {"message": "bad key"}}'))
    [failure], _ = run_complete(make_settings(server.base_url), req())
    assert isinstance(failure, RequestFailed) and "HTTP 401" in str(failure)
    assert server.count == 1


def test_truncated_and_unusable_responses_are_not_cached(make_settings):
    with FakeLLMServer(lambda body: Reply(text="Q1: Ye", finish_reason="length")) as srv:
        settings = make_settings(srv.base_url)
        [cut], _ = run_complete(settings, req())
        assert isinstance(cut, RequestFailed) and "cut off" in str(cut)

        def reject(completion):
            raise UnusableResponse("no answer found")

        [bad], _ = run_complete(settings, req(), validate=reject, allow_truncated=True)
        assert isinstance(bad, RequestFailed) and "no answer found" in str(bad)
        [ok], _ = run_complete(settings, req(), allow_truncated=True)
        assert ok.text == "Q1: Ye"
    with ResponseCache(settings.cache_dir) as cache:
        assert len(cache) == 1


def test_missing_and_empty_logprobs_fall_back(make_settings):
    with FakeLLMServer(lambda body: Reply(text="Yes", logprobs=False)) as srv:
        [completion], _ = run_complete(make_settings(srv.base_url), req())
    assert completion.text == "Yes" and completion.tokens is None


def test_endpoint_rejecting_logprobs_is_remembered_and_replays(make_settings):
    import asyncio

    from ucsj.llm import LLMClient

    with FakeLLMServer() as srv:
        srv.state.reject_logprobs = True
        settings = make_settings(srv.base_url)

        async def go():
            async with LLMClient(settings) as client:
                first = await client.complete(req("one"))
                second = await client.complete(req("two"))
                return first, second, client.logprobs_available(settings.model)

        first, second, available = asyncio.run(go())
        assert first.text == second.text == "Yes" and available is False
        # one refused request, then straight to requests without logprobs
        assert ["logprobs" in b for b in srv.requests] == [True, False, False]
    replay = make_settings("http://127.0.0.1:9/v1", cache_mode=CacheMode.REPLAY)
    [again], _ = run_complete(replay, req("one"))
    assert again.text == "Yes"


def test_off_mode_neither_reads_nor_writes(server, make_settings):
    settings = make_settings(server.base_url, cache_mode=CacheMode.OFF)
    run_complete(settings, req())
    run_complete(settings, req())
    assert server.count == 2
    assert not settings.cache_dir.exists()


def test_refresh_mode_asks_again_and_overwrites(server, make_settings):
    run_complete(make_settings(server.base_url), req())
    run_complete(make_settings(server.base_url, cache_mode=CacheMode.REFRESH), req())
    assert server.count == 2


def test_concurrency_bounds_requests_in_flight(make_settings):
    import threading

    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(body):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return Reply(text="Yes")

    with FakeLLMServer(slow) as srv:
        results, _ = run_complete(
            make_settings(srv.base_url, concurrency=3), *(req(f"q{i}") for i in range(12))
        )
    assert all(r.text == "Yes" for r in results)
    assert peak[0] == 3


def test_api_key_is_sent_but_never_stored(server, make_settings, tmp_path):
    secret = "sk-test-UNIQUE-9f8e7d6c5b4a"
    settings = make_settings(server.base_url, api_key=secret)
    server.queue(Fault("403", body=f'{{"error": {{"message": "key {secret} is revoked"}}}}'))
    [failure], _ = run_complete(settings, req("x"))
    assert secret not in str(failure) and "***" in str(failure)
    run_complete(settings, req("y"))
    assert server.state.headers[-1]["Authorization"] == f"Bearer {secret}"
    assert secret not in repr(settings)
    for path in settings.cache_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_unreachable_endpoint_stops_the_run_with_one_clear_error(tmp_path, capsys):
    import json

    from conftest import ucsj

    row = {"id": "a", "lang": "en", "context": "P.", "query": "Q?", "answer": "A.", "label": 1}
    (tmp_path / "d.jsonl").write_text(
        "\n".join(json.dumps({**row, "id": str(i)}) for i in range(50)) + "\n"
    )
    (tmp_path / "c.json").write_text(
        json.dumps(
            {
                "task": "rag-faithfulness",
                "concepts": [
                    {
                        "id": "c1",
                        "name": "A",
                        "questions": [{"id": "c1.q1", "text": "Is it right?"}],
                    }
                ],
            }
        )
    )
    code = ucsj(
        "score",
        str(tmp_path / "d.jsonl"),
        "--criteria",
        str(tmp_path / "c.json"),
        "-o",
        str(tmp_path / "s.jsonl"),
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--max-retries",
        "1",
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "cannot connect to http://127.0.0.1:9/v1" in err and err.count("\n") <= 3, err
    assert not (tmp_path / "s.jsonl").exists()
    assert "samples could not be scored" not in err, (
        "the run stops; samples are not tried one by one"
    )


def test_sustained_429s_lower_concurrency_then_it_recovers(make_settings):
    import asyncio
    import threading

    from ucsj.llm import LLMClient

    in_flight, peaks, lock = [0], [], threading.Lock()

    def slow(body):
        with lock:
            in_flight[0] += 1
            peaks.append(in_flight[0])
        time.sleep(0.02)
        with lock:
            in_flight[0] -= 1
        return Reply(text="Yes")

    with FakeLLMServer(slow) as srv:
        srv.queue(*["429"] * 12)
        settings = make_settings(srv.base_url, concurrency=8, max_retries=8)

        async def go():
            async with LLMClient(settings) as client:
                results = await asyncio.gather(*(client.complete(req(f"q{i}")) for i in range(60)))
                return results, client._slots

        results, limit = asyncio.run(go())
    assert all(r.text == "Yes" for r in results)
    # 12 refusals come in a few bursts (requests sent between two drops): a few drops of a
    # tenth, where halving per refusal took the bound to 1
    assert limit.decreases <= 5 and 3 <= limit.lowest < 8
    assert limit.limit > limit.lowest, "successes raise it again"
    assert limit.limit <= 8


def test_slow_start_then_one_drop_per_congestion_event():
    import asyncio

    from ucsj.llm.client import AdaptiveLimit

    limit = AdaptiveLimit(128)
    assert limit.limit == 32  # not 128 connections at once to a server that may take 32
    for _ in range(32):
        asyncio.run(limit.succeeded())
    assert limit.limit == 64  # doubling per window while nothing is refused
    granted_in = limit.generation
    for _ in range(32):  # everything granted before the drop is refused together
        limit.throttled(granted_in)
    assert limit.limit == 32 and limit.decreases == 1 and not limit.slow_start
    limit.throttled(limit.generation)  # a request granted after the drop: a new event
    assert limit.limit == 28 and limit.decreases == 2  # a tenth off now, not half


def test_the_bound_regains_its_last_good_level_in_a_few_windows():
    import asyncio

    from ucsj.llm.client import AdaptiveLimit

    limit = AdaptiveLimit(128)

    def window() -> None:
        for _ in range(limit.limit):
            asyncio.run(limit.succeeded())

    limit.throttled(limit.generation)  # ends slow start at 16, the last level that held
    while limit.limit < 33:
        window()
    limit.throttled(limit.generation)
    assert limit.limit == 32, "a refused probe goes back to the level that held, no lower"
    limit.throttled(limit.generation)
    assert limit.limit == int(32 * AdaptiveLimit.BACKOFF), "a refusal there takes a tenth off"
    windows = 0
    while limit.limit < 31:
        window()
        windows += 1
    assert windows <= 3, "half the gap per window, not one request per window"
    for _ in range(AdaptiveLimit.PLATEAU):
        window()
    assert limit.limit == 31, "it holds below the refused level for a while"
    for level in (32, 33):
        window()
        assert limit.limit == level, "then probes one at a time"


def test_retry_after_holds_back_only_the_refused_request(make_settings):
    with FakeLLMServer(lambda body: Reply(text="Yes"), latency=0.02) as srv:
        srv.queue(Fault("429", retry_after="0.5"))
        settings = make_settings(srv.base_url, concurrency=4, max_retries=2)
        results, stats = run_complete(settings, *(req(f"q{i}") for i in range(12)))
        order = [body["messages"][-1]["content"] for body in srv.requests]
    assert all(r.text == "Yes" for r in results) and stats.retries == 1
    refused = order[0]
    assert order.count(refused) == 2 and order[-1] == refused, (
        "the other eleven were sent and answered while the refused one waited"
    )


def test_identical_requests_in_flight_are_sent_once(make_settings):
    with FakeLLMServer(lambda body: Reply(text="Yes"), latency=0.1) as srv:
        results, stats = run_complete(
            make_settings(srv.base_url), req("same"), req("same"), req("same"), req("other")
        )
    assert [r.text for r in results] == ["Yes"] * 4
    assert srv.count == 2 and stats.requests_sent == 2


def test_requests_go_through_the_environment_proxy(server, make_settings, monkeypatch):
    """HTTP_PROXY is honoured: the request for an unreachable host reaches the proxy (here the
    test server, which answers absolute-form requests itself)."""
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.base_url.removesuffix("/v1"))
    settings = make_settings("http://llm.invalid/v1")
    request = ChatRequest.chat("m-2024-01-01", [("user", "Hi")], max_tokens=4)
    (completion,), _ = run_complete(settings, request)
    assert completion.text == "Yes" and server.count == 1
    assert server.state.headers[0]["Host"] == "llm.invalid"


def test_no_proxy_exempts_hosts(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    assert environment_proxy("https://api.example/v1") == "http://proxy.example:3128"
    assert environment_proxy("https://internal.example/v1") is None


def test_a_server_at_capacity_loses_nothing_and_is_not_starved(make_settings):
    """Asked for 4x what the server takes: every request is answered and the bound settles
    near the capacity instead of collapsing toward 1."""
    import asyncio

    from ucsj.llm import LLMClient

    with FakeLLMServer(lambda body: Reply(text="Yes"), latency=0.02, capacity=8) as srv:
        settings = make_settings(srv.base_url, concurrency=32, max_retries=8)

        async def go():
            async with LLMClient(settings) as client:
                results = await asyncio.gather(*(client.complete(req(f"q{i}")) for i in range(240)))
                return results, client._slots

        results, limit = asyncio.run(go())
        refused = srv.state.refused
    assert [r.text for r in results] == ["Yes"] * 240 and srv.count == 240
    assert limit.lowest >= 4, "one drop per congestion event keeps it near the capacity"
    assert refused < 120
