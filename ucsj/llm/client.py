"""The async OpenAI-compatible client: one shared httpx pool, bounded concurrency, retries, cache.

Every LLM call in ucsj goes through `LLMClient.complete`, which consults the response cache
first and records what the endpoint answered, so reruns send no request.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import logging
import os
import random
import re
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from ucsj import __version__
from ucsj.errors import BackendError, CacheMissError, InputError, RequestsPending
from ucsj.llm.batch import PendingWriter
from ucsj.llm.cache import CacheMode, ResponseCache, default_cache_dir, make_entry
from ucsj.llm.request import ChatRequest
from ucsj.llm.response import Completion, MalformedResponse, parse_completion
from ucsj.redact import redact, redact_url

log = logging.getLogger("ucsj")

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
DEFAULT_MODEL = "smollm2-135m-instruct-q4_1"  # the alias `ucsj serve` gives the built-in model
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 120.0
# Hosted model families move their plain names to new snapshots; a date pins them. Open-weight
# names (Qwen/Qwen3-32B, a .gguf alias) name fixed checkpoints.
_HOSTED = re.compile(
    r"^(gpt-|chatgpt|o\d|claude|gemini|mistral-(large|medium|small)|command)", re.I
)
_DATED = re.compile(r"\d{4}-?\d{2}-?\d{2}|-\d{4}$|-\d{3}$|@\d{8}")


class UnusableResponse(ValueError):
    """The caller's check rejected a response (it is neither cached nor retried)."""


class RequestFailed(BackendError):
    """One request failed for good: retries exhausted, rejected or unusable."""


class NotYetAnswered(RequestFailed):
    """`--cache collect`: the request was written to the pending file instead of being sent.
    A sample that needs it fails like one whose request failed; the run then exits 4."""


class EndpointUnreachable(BackendError):
    """No connection could ever be made: the whole run stops instead of failing every sample."""


@dataclass
class LLMSettings:
    """Where and how to call the LLM. The API key is never written anywhere."""

    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 5
    cache_mode: CacheMode = CacheMode.READWRITE
    cache_dir: Path | None = None
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    pending: Path | None = None  # --cache collect: the Batch API input file of missing requests

    def resolved_base_url(self) -> str:
        url = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return url.rstrip("/")

    def resolved_api_key(self) -> str | None:
        return self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")

    def validate(self) -> None:
        if self.concurrency < 1:
            raise InputError("--concurrency must be at least 1")
        if self.timeout <= 0:
            raise InputError("--timeout must be positive")
        if self.max_retries < 0:
            raise InputError("--max-retries must be 0 or more")
        if not self.model:
            raise InputError("--model must not be empty")
        collect = CacheMode(self.cache_mode) is CacheMode.COLLECT
        if collect and self.pending is None:
            raise InputError("--cache collect needs --pending FILE (where the requests go)")
        if self.pending is not None and not collect:
            raise InputError("--pending is for --cache collect")
        check_base_url(self.resolved_base_url())


def check_base_url(url: str) -> None:
    """Refuse a base URL that no request could ever reach (exit 2 before any retry)."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError past 65535
    except ValueError as exc:
        raise InputError(f"--base-url {shown} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"--base-url {shown} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)"
        )
    if port == 0:
        raise InputError(f"--base-url {shown}: port 0 is not a port")


class HttpShards:
    """httpx connection pools of at most SHARD_SIZE connections each, used at the transport
    level; a request goes to the least busy pool.

    One httpcore pool spends CPU super-linearly past ~32 connections (it rescans every
    connection for every request); several small pools keep the cost per request flat. The
    requests skip httpx.AsyncClient's layers (URL merging, cookies, auth and redirect
    handling, none of which an API call here uses): at 32 in flight that cut the client's CPU
    per request from 3.2 to 2.4 ms (bench/RESULTS.md). Proxies still come from the
    environment (HTTPS_PROXY, NO_PROXY, ...), as httpx would take them.
    """

    SHARD_SIZE = 8

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float, size: int) -> None:
        count = -(-size // self.SHARD_SIZE)
        per = -(-size // count)
        # one TLS context for all pools: building one loads the CA bundle (~80 ms each)
        tls = httpx.create_ssl_context()
        proxy = environment_proxy(base_url)
        self.transports = [
            httpx.AsyncHTTPTransport(
                verify=tls,
                proxy=proxy,
                # keep-alive as large as the pool, or connections churn past httpx's 20
                limits=httpx.Limits(max_connections=per, max_keepalive_connections=per),
            )
            for _ in range(count)
        ]
        self.busy = [0] * count
        self.base_url = base_url.rstrip("/")
        # built once: parsing a URL and headers for every request cost ~50 us each time
        self.headers = httpx.Headers(
            {
                "Accept": "application/json",
                "Accept-Encoding": "gzip, deflate",
                "Content-Type": "application/json",
                **headers,
            }
        )
        self.urls: dict[str, httpx.URL] = {}
        self.timeout = httpx.Timeout(timeout).as_dict()

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST `body` as JSON to the base URL + `path`; the whole response is read."""
        index = min(range(len(self.transports)), key=self.busy.__getitem__)
        self.busy[index] += 1
        url = self.urls.get(path)
        if url is None:
            url = self.urls[path] = httpx.URL(self.base_url + path)
        request = httpx.Request(
            "POST",
            url,
            content=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
            headers=self.headers,
            extensions={"timeout": self.timeout},
        )
        try:
            response = await self.transports[index].handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
            return response
        finally:
            self.busy[index] -= 1

    async def aclose(self) -> None:
        for transport in self.transports:
            await transport.aclose()


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY), unless
    NO_PROXY exempts its host."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class AdaptiveLimit:
    """Bounds requests in flight and finds the server's capacity from its 429s.

    It starts at INITIAL (or the maximum, when lower) and doubles per window of `limit`
    successes up to the maximum (slow start: asked for 128, it does not open 128 connections
    at once to a server that takes 32); the first refusal halves it, back to the last level
    that went through, and ends the doubling.
    A burst of refusals is one congestion event: the bound drops once, later by BACKOFF, and
    refusals of requests granted a slot before that drop do not count again (halving per
    refusal took a client asked for 128 against a server capped at 32 down toward 1). After a
    drop, each window of `limit` successes grows the bound by half the distance to one below
    where it was refused, so it regains the last good level in a few round trips; it holds
    there for PLATEAU windows before probing one more (each probe costs a refusal, and on a
    busy machine a refusal's CPU is what the run lacks), then grows by one per window. A
    refused probe goes back to the level that held; a refusal at or below it (the server's
    capacity shrank, or another client shares it) takes BACKOFF off.

    Waiters queue first in, first out and a freed slot wakes exactly one of them: waking them
    all (a condition's notify_all) cost more CPU per request than the HTTP call at 32 in flight.
    """

    BACKOFF = 0.9
    PLATEAU = 8  # windows at the last good level before probing above it
    INITIAL = 32  # 32 in flight cost no start-up time in bench/RESULTS.md's concurrency runs

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.limit = min(maximum, self.INITIAL)
        self.lowest = self.limit
        self.slow_start = self.limit < maximum
        self.generation = 0  # bumped by each drop; a request carries the one it was sent in
        self.decreases = 0
        self._refused_at = self.limit  # the bound at the last congestion event
        self.in_flight = 0
        self._successes = 0
        self._plateau = 0  # windows spent at the last good level
        self._good: int | None = None  # while probing above it: the level that held
        self._waiters: deque[asyncio.Future[int]] = deque()

    async def __aenter__(self) -> int:
        """Take a slot; return the generation it was granted in (what a 429 for the request
        then reports: a slot granted before a drop belongs to the event that caused it)."""
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return self.generation
        slot = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            return await slot  # the slot is counted in in_flight when it is handed over
        except asyncio.CancelledError:
            if slot.done() and not slot.cancelled():
                self._release()  # handed over just as the waiter was cancelled
            else:
                self._waiters.remove(slot)
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        self.in_flight -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            slot = self._waiters.popleft()
            if not slot.done():
                self.in_flight += 1
                slot.set_result(self.generation)

    def throttled(self, sent_in: int | None = None) -> None:
        """A 429 for a request sent in generation `sent_in` (None: the current one)."""
        if sent_in is not None and sent_in != self.generation:
            return  # part of a congestion event already answered
        self.generation += 1
        self._successes = 0
        self._plateau = 0
        good, self._good = self._good, None
        if self.limit == 1:
            return
        if self.slow_start:
            # the window before the doubling went through: that level is the last good one
            self.slow_start = False
            self.limit = max(1, self.limit // 2)
            self._refused_at = self.limit + 1
        elif good is not None and self.limit > good:
            # a probe above the level that held was refused: back to that level, no lower
            self.limit = good
            self._refused_at = self.limit + 1
        else:
            self._refused_at = self.limit
            self.limit = max(1, min(self.limit - 1, int(self.limit * self.BACKOFF)))
        self.decreases += 1
        if self.limit < self.lowest:
            self.lowest = self.limit
        level = logging.WARNING if self.decreases == 1 else logging.DEBUG
        log.log(level, "rate limited (429): %d requests in flight at most for now", self.limit)

    async def succeeded(self) -> None:
        self._successes += 1
        if self.limit < self.maximum and self._successes >= self.limit:
            self._successes = 0
            if self.slow_start:
                self.limit = min(self.maximum, 2 * self.limit)
            elif self.limit < self._refused_at - 1:
                gap = self._refused_at - 1 - self.limit
                self.limit = min(self.maximum, self.limit + max(1, gap // 2))
            elif self._plateau < self.PLATEAU:
                self._plateau += 1
                return
            else:
                self._good = self.limit  # a whole window went through at this level
                self.limit = min(self.maximum, self.limit + 1)
            self._hand_over()


@dataclass
class ClientStats:
    requests_sent: int = 0  # HTTP requests, retries included
    cache_hits: int = 0
    cache_writes: int = 0
    retries: int = 0
    failures: int = 0


class LLMClient:
    """Use as `async with LLMClient(settings) as client: await client.complete(request)`."""

    def __init__(self, settings: LLMSettings, cache: ResponseCache | None = None) -> None:
        settings.validate()
        cache_dir = Path(settings.cache_dir or default_cache_dir())
        if cache is None and settings.cache_mode == CacheMode.REPLAY and not cache_dir.is_dir():
            raise InputError(
                f"--cache replay: no cache directory at {cache_dir} (replay reads "
                "recorded responses only; record them first or point --cache-dir at them)"
            )
        self.settings = settings
        self.mode = CacheMode(settings.cache_mode)
        self.stats = ClientStats()
        self._own_cache = cache is None and self.mode is not CacheMode.OFF
        self.cache = (
            cache
            if cache is not None or self.mode is CacheMode.OFF
            else ResponseCache(settings.cache_dir or default_cache_dir())
        )
        self._http: HttpShards | None = None
        self._slots: AdaptiveLimit | None = None
        self._logprobs_param_ok: dict[str, bool] = {}  # model -> endpoint accepts `logprobs`
        self._logprobs_returned: dict[str, bool] = {}  # model -> endpoint returned logprobs
        # model -> whether a miss found a recording made without logprobs (probed once a run)
        self._found_without_logprobs: dict[str, bool] = {}
        self._warned: set[str] = set()
        self._answered = False  # has the endpoint ever answered (any HTTP status)?
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._base_url = settings.resolved_base_url()
        self._host = _host_of(self._base_url)
        self._pending = (
            PendingWriter(settings.pending)
            if self.mode is CacheMode.COLLECT and settings.pending is not None
            else None
        )

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        await self.aclose()
        if self._pending is None:
            return
        if exc_type is not None and not issubclass(exc_type, RequestFailed):
            self._pending.discard()  # an interrupt or a bad input: the run did not finish
            return
        self.finish_pending()

    def finish_pending(self) -> None:
        """--cache collect: write the pending file (empty when the cache answered everything)
        and raise RequestsPending (exit 4) when it is not empty."""
        if self._pending is None:
            return
        count = self._pending.finish()
        if count:
            path = self._pending.path
            raise RequestsPending(
                f"{count} request{'s' if count != 1 else ''} pending, written to {path} as "
                "Batch API input: answer them with a batch engine, then run `ucsj cache "
                f"import-batch OUTPUT --requests {path}` and rerun this command",
                count,
            )

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._own_cache and self.cache is not None:
            self.cache.close()
            self._own_cache = False  # closing twice is harmless

    def logprobs_available(self, model: str) -> bool | None:
        """What this endpoint has shown about logprobs for `model`; None until it has answered."""
        if self._logprobs_param_ok.get(model) is False:
            return False
        return self._logprobs_returned.get(model)

    def cached(self, request: ChatRequest) -> Completion | None:
        """The cached completion for `request`, without a task or a connection (None: ask)."""
        completion = self._lookup(request)
        if completion is not None:
            self.stats.cache_hits += 1
        return completion

    async def complete(
        self,
        request: ChatRequest,
        *,
        validate: Callable[[Completion], None] | None = None,
        allow_truncated: bool = False,
    ) -> Completion:
        """The completion for `request`: from the cache when it holds one, else the endpoint."""
        cached = self._lookup(request)
        if cached is not None:
            self.stats.cache_hits += 1
            # an imported batch answer was not checked when it was stored
            self._check(cached, request, validate, allow_truncated)
            return cached
        if self._pending is not None:
            self._pending.add(request)
            raise NotYetAnswered(f"pending: request {request.key[:16]}… awaits a batch answer")
        if self.mode is CacheMode.REPLAY:
            raise CacheMissError(
                f"replay mode: no cached response for a request to model '{request.model}' "
                f"(key {request.key[:16]}…, last message: {_snippet(request.messages[-1:])}); "
                "record it with --cache readwrite or import the fixture that holds it"
            )
        self._warn_alias(request.model)
        send = request
        if request.logprobs and self._logprobs_param_ok.get(request.model) is False:
            send = request.without_logprobs()
        payload, completion, meta, send = await self._fetch_once(send)
        self._check(completion, send, validate, allow_truncated)
        return self._record(send, payload, meta, completion)

    def _check(
        self,
        completion: Completion,
        request: ChatRequest,
        validate: Callable[[Completion], None] | None,
        allow_truncated: bool,
    ) -> None:
        """Refuse a cut-off answer (unless allowed) or one the caller's check rejects."""
        if completion.truncated and not allow_truncated:
            raise RequestFailed(
                f"response was cut off at max_tokens={request.max_tokens} "
                "(finish_reason 'length'); not cached"
            )
        if validate is not None:
            try:
                validate(completion)
            except UnusableResponse as exc:
                self.stats.failures += 1
                raise RequestFailed(f"unusable response: {exc}; not cached") from None

    async def _fetch_once(
        self, request: ChatRequest
    ) -> tuple[dict[str, Any], Completion, dict[str, Any], ChatRequest]:
        """Send a request, or join the identical one already in flight.

        Two samples can make the same request (RocketEval's checklist for a shared question);
        sending it twice would cost a call, and a server whose answers depend on its previous
        request (llama.cpp) could record one answer while the other caller used a second one.
        """
        key = request.key
        fetch = self._inflight.get(key)
        if fetch is None:
            fetch = asyncio.ensure_future(self._send_with_retries(request))
            self._inflight[key] = fetch
            fetch.add_done_callback(lambda done: self._fetch_done(key, done))
        return await asyncio.shield(fetch)

    def _fetch_done(self, key: str, done: asyncio.Future[Any]) -> None:
        self._inflight.pop(key, None)
        # Mark the outcome as seen: when the run stops early (an unreachable endpoint) nobody
        # awaits the other requests, and asyncio would print a traceback for each of them.
        if not done.cancelled():
            done.exception()

    # -- cache -------------------------------------------------------------------------------

    def _lookup(self, request: ChatRequest) -> Completion | None:
        if self.cache is None or not self.mode.reads:
            return None
        entry = self.cache.get(request.key)
        if entry is None and request.logprobs and self._may_be_recorded_without_logprobs(request):
            entry = self.cache.get(request.without_logprobs().key)
            self._found_without_logprobs.setdefault(request.model, entry is not None)
        if entry is None:
            return None
        try:
            return parse_completion(entry["response"])
        except MalformedResponse:
            log.warning("cache entry %s is unreadable; asking the endpoint again", entry["key"])
            return None

    def _may_be_recorded_without_logprobs(self, request: ChatRequest) -> bool:
        """Whether a miss should also try the request's key without logprobs (recorded against
        an endpoint that refused the parameter). Replay always tries; otherwise the first miss
        per model tries, and later ones only if that found one or the endpoint refused."""
        if self.mode is CacheMode.REPLAY or self._logprobs_param_ok.get(request.model) is False:
            return True
        return self._found_without_logprobs.get(request.model, True)

    def _record(
        self,
        request: ChatRequest,
        payload: dict[str, Any],
        meta: dict[str, Any],
        completion: Completion,
    ) -> Completion:
        """Store the response; return the completion the cache now holds for the request.

        A refresh replaces the recording. Otherwise the first recording wins: when another
        process recorded this request first (a server can answer it differently), its answer
        is used here too, so outputs always agree with the cache."""
        if self.cache is None or not self.mode.writes:
            return completion
        entry = make_entry(request.key_material(), payload, meta, key=request.key)
        self.stats.cache_writes += 1
        if self.mode is CacheMode.REFRESH:
            self.cache.put(entry)
            return completion
        recorded = self.cache.add(entry)
        if recorded is None or recorded["response"] == payload:
            return completion
        try:
            return parse_completion(recorded["response"])
        except MalformedResponse:
            return completion

    # -- HTTP --------------------------------------------------------------------------------

    def _client(self) -> HttpShards:
        if self._http is None:
            headers = {"User-Agent": f"ucsj/{__version__}"}
            key = self.settings.resolved_api_key()
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._http = HttpShards(
                self._base_url, headers, self.settings.timeout, self.settings.concurrency
            )
            self._slots = AdaptiveLimit(self.settings.concurrency)
        return self._http

    async def _send_with_retries(
        self, request: ChatRequest
    ) -> tuple[dict[str, Any], Completion, dict[str, Any], ChatRequest]:
        http = self._client()
        assert self._slots is not None
        attempt = 0
        while True:
            try:
                async with self._slots as generation:
                    started = time.monotonic()  # after the queue: latency is the server's
                    self.stats.requests_sent += 1
                    response = await http.post("/chat/completions", request.body())
                    latency = time.monotonic() - started
                    self._answered = True
                if response.status_code == 200:
                    await self._slots.succeeded()
                    payload = response.json()
                    completion = parse_completion(payload)
                    self._note_logprobs(request, completion)
                    return (
                        payload,
                        completion,
                        self._meta(request, completion, latency, attempt),
                        request,
                    )
                if request.logprobs and _rejects_logprobs(response):
                    log.warning(
                        "%s rejects the logprobs parameter for %s; answers will be read "
                        "from the text",
                        self._host,
                        request.model,
                    )
                    self._logprobs_param_ok[request.model] = False
                    request = request.without_logprobs()
                    continue
                if response.status_code not in RETRY_STATUS:
                    self.stats.failures += 1
                    raise RequestFailed(
                        f"{self._host} answered HTTP {response.status_code}: "
                        f"{self._redact(_error_text(response))}"
                    )
                reason = f"HTTP {response.status_code}"
                if response.status_code == 429:
                    self._slots.throttled(generation)
                wait = _retry_after(response)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                reason, wait = _transport_reason(exc, self.settings.timeout), None
                if self._refused_locally(exc, attempt):
                    attempt = max(attempt, self.settings.max_retries)
            except (ValueError, MalformedResponse) as exc:  # JSON decode errors are ValueErrors
                reason, wait = f"malformed response ({exc})", None
            if attempt >= self.settings.max_retries:
                self.stats.failures += 1
                if not self._answered and reason.startswith("connection error"):
                    raise EndpointUnreachable(
                        f"cannot connect to {redact_url(self._base_url)} ({reason}); start the "
                        "server, or check --base-url / OPENAI_BASE_URL"
                    )
                raise RequestFailed(
                    f"{self._host}: {reason}; gave up after {attempt + 1} "
                    f"attempt{'s' if attempt else ''}"
                )
            delay = self._backoff(attempt, wait)
            if (
                reason.startswith("connection error")
                and not self._answered
                and _is_loopback(self._host)
            ):
                delay = min(delay, LOOPBACK_RETRY_S)
            log.debug(
                "%s: %s; retry %d of %d in %.2fs",
                self._host,
                reason,
                attempt + 1,
                self.settings.max_retries,
                delay,
            )
            self.stats.retries += 1
            attempt += 1
            await asyncio.sleep(delay)

    def _redact(self, text: str) -> str:
        """Servers sometimes echo the key they rejected (in any case); never let it reach a
        message."""
        return redact(text, [self.settings.resolved_api_key()])

    def _refused_locally(self, exc: Exception, attempt: int) -> bool:
        """A refused connection to a loopback address that never answered: nothing listens
        there, so one short retry (a server still starting) is all that is worth waiting."""
        return (
            isinstance(exc, httpx.ConnectError)
            and not self._answered
            and attempt >= 1
            and _is_loopback(self._host)
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        ceiling = min(self.settings.backoff_max, self.settings.backoff_base * 2**attempt)
        return ceiling * random.uniform(0.5, 1.0)  # jitter spreads synchronized retries

    def _note_logprobs(self, request: ChatRequest, completion: Completion) -> None:
        if not request.logprobs:
            return
        model = request.model
        known = self._logprobs_returned.get(model)
        self._logprobs_returned[model] = bool(known) or completion.has_logprobs
        if known is None and not completion.has_logprobs:
            log.warning(
                "%s returned no logprobs for %s; answers will be read from the text",
                self._host,
                model,
            )
        returned = completion.model
        if (
            returned
            and not _same_model(model, returned)
            and f"served:{returned}" not in self._warned
        ):
            self._warned.add(f"served:{returned}")
            log.warning("asked for model '%s' but %s answered as '%s'", model, self._host, returned)

    def _meta(
        self, request: ChatRequest, completion: Completion, latency: float, attempt: int
    ) -> dict[str, Any]:
        return {
            "requested_model": request.model,
            "model": completion.model,
            "system_fingerprint": completion.system_fingerprint,
            "usage": completion.usage,
            "latency_s": round(latency, 4),
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "endpoint": self._host,
            "attempts": attempt + 1,
            "has_logprobs": completion.has_logprobs,
            "ucsj": __version__,
        }

    def _warn_alias(self, model: str) -> None:
        if model in self._warned or not is_alias(model):
            return
        self._warned.add(model)
        log.warning(
            "model '%s' looks like an alias, not a pinned snapshot: its answers may "
            "change under the same cache key",
            model,
        )


def is_alias(model: str) -> bool:
    """True for names that a provider re-points to newer snapshots (gpt-4o, *-latest)."""
    name = model.split("/")[-1]
    return name.lower().endswith("latest") or bool(_HOSTED.match(name) and not _DATED.search(name))


def _same_model(requested: str, returned: str) -> bool:
    a, b = requested.lower(), returned.lower()
    return a == b or b.startswith(a) or a.startswith(b) or a.split("/")[-1] in b


LOOPBACK_RETRY_S = 0.5


def _is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_of(url: str) -> str:
    """host[:port] only: never the scheme's userinfo, which may hold credentials."""
    parts = urlsplit(url)
    host = parts.hostname or "endpoint"
    return f"{host}:{parts.port}" if parts.port else host


def _rejects_logprobs(response: httpx.Response) -> bool:
    return response.status_code in (400, 422) and "logprob" in response.text.lower()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _transport_reason(exc: Exception, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g}s"
    return f"connection error ({type(exc).__name__})"


def _error_text(response: httpx.Response, limit: int = 300) -> str:
    try:
        body = response.json()
        message = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message", message)
        text = str(message)
    except ValueError:
        text = response.text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _snippet(messages: tuple[tuple[str, str], ...], limit: int = 80) -> str:
    text = " ".join(messages[0][1].split()) if messages else ""
    return repr(text if len(text) <= limit else text[:limit] + "…")
