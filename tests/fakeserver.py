"""A loopback OpenAI-compatible /v1/chat/completions server for tests.

Started by the tests on 127.0.0.1 and a random port. Its answers come from a `responder`
(request body -> Reply); queued `faults` make the next requests fail in scripted ways.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """An answer: its text split into tokens, each with the probabilities of its alternatives.

    `tokens` is a list of (token, {alternative: probability}); None gives each token
    probability 1. `logprobs=False` answers without any logprobs.
    """

    text: str | None = None
    tokens: list[tuple[str, dict[str, float]]] | None = None
    logprobs: bool = True
    finish_reason: str = "stop"
    model: str | None = None

    def content(self) -> str:
        if self.text is not None:
            return self.text
        return "".join(tok for tok, _ in self.tokens or [])


def tokens_of(text: str) -> list[tuple[str, dict[str, float]]]:
    """Split on whitespace boundaries, each token certain."""
    import re

    return [(tok, {tok: 1.0}) for tok in re.findall(r"\s*\S+|\s+", text)]


def answer_lines(probabilities: list[float]) -> Reply:
    """`Q1: Yes` lines whose answer tokens carry P(yes) = p and P(no) = 1 - p."""
    tokens: list[tuple[str, dict[str, float]]] = []
    for i, p in enumerate(probabilities, start=1):
        if i > 1:
            tokens.append(("\n", {"\n": 1.0}))
        tokens += [("Q", {"Q": 1.0}), (str(i), {str(i): 1.0}), (":", {":": 1.0})]
        alts = {" Yes": p, " No": 1.0 - p}
        tokens.append((" Yes" if p >= 0.5 else " No", alts))
    return Reply(tokens=tokens)


@dataclass
class Fault:
    kind: str  # 429 | 500 | 502 | 503 | 400 | hang | malformed | reset | empty_choices
    retry_after: str | None = None
    body: str | None = None


@dataclass
class ServerState:
    responder: Callable[[dict[str, Any]], Reply]
    latency: float = 0.0
    faults: deque[Fault] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    reject_logprobs: bool = False
    # capacity: requests answered at once; one more is refused with 429 (and capacity_retry_after)
    capacity: int | None = None
    capacity_retry_after: str | None = None
    in_flight: int = 0
    refused: int = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: ServerState  # set on the subclass per server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm
        # and delayed ACKs add ~40 ms to every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/stats"):  # for benchmarks in another process
            with self.state.lock:
                counts = {"answered": len(self.state.requests), "refused": self.state.refused}
            self._send(200, json.dumps(counts))
        elif self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fake-model"}]}))
        else:
            self._send(404, json.dumps({"error": {"message": "not found"}}))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, json.dumps({"error": {"message": "not found"}}))
            return
        body = json.loads(raw)
        state = self.state
        with state.lock:
            if state.capacity is not None and state.in_flight >= state.capacity:
                state.refused += 1
                full = True
            else:
                full = False
                state.in_flight += 1
                state.requests.append(body)
                state.headers.append(dict(self.headers))
                fault = state.faults.popleft() if state.faults else None
        if full:
            retry = state.capacity_retry_after
            self._send(
                429,
                json.dumps({"error": {"message": "over capacity"}}),
                {"Retry-After": retry} if retry is not None else None,
            )
            return
        self._holding = True
        try:
            self._answer(body, fault)
        finally:
            self._let_go()

    def _let_go(self) -> None:
        """The request leaves the server's capacity, before its answer is written: the client
        may send its next request on this connection as soon as it reads the answer."""
        if getattr(self, "_holding", False):
            self._holding = False
            with self.state.lock:
                self.state.in_flight -= 1

    def _answer(self, body: dict[str, Any], fault: Fault | None) -> None:
        state = self.state
        if state.latency:
            time.sleep(state.latency)
        if fault is not None and self._fault(fault):
            return
        if state.reject_logprobs and "logprobs" in body:
            self._send(400, json.dumps({"error": {"message": "logprobs is not supported"}}))
            return
        reply = state.responder(body)
        self._send(200, json.dumps(completion_body(body, reply)))

    def _fault(self, fault: Fault) -> bool:
        """Act out a fault; False when the request should then be answered normally."""
        if fault.kind == "hang":
            self.state.stop.wait(30)
            self.close_connection = True
            return True
        if fault.kind == "reset":
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            self.close_connection = True
            self.connection.close()
            return True
        if fault.kind == "malformed":
            self._send(200, fault.body or '{"choices": [{"message": ')
            return True
        if fault.kind == "empty_choices":
            self._send(200, json.dumps({"id": "x", "choices": []}))
            return True
        status = int(fault.kind)
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        self._send(
            status, fault.body or json.dumps({"error": {"message": f"scripted {status}"}}), headers
        )
        return True

    def _send(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        self._let_go()
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def completion_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """An OpenAI-shaped body, with llama.cpp's quirks (`bytes` null, an extra `id`)."""
    tokens = reply.tokens if reply.tokens is not None else tokens_of(reply.content())
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": reply.content()},
        "finish_reason": reply.finish_reason,
    }
    if request.get("logprobs") and reply.logprobs:
        top_n = int(request.get("top_logprobs") or 0)
        content = []
        for tok, alts in tokens:
            ranked = sorted(alts.items(), key=lambda kv: -kv[1])[: max(top_n, 1)]
            content.append(
                {
                    "id": 0,
                    "token": tok,
                    "bytes": None,
                    "logprob": _log(alts.get(tok, 1.0)),
                    "top_logprobs": [
                        {"id": 0, "token": t, "bytes": None, "logprob": _log(p)} for t, p in ranked
                    ],
                }
            )
        choice["logprobs"] = {"content": content}
    else:
        choice["logprobs"] = None
    prompt_tokens = sum(len(m.get("content", "").split()) for m in request.get("messages", []))
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": reply.model or request.get("model"),
        "system_fingerprint": "fp_test",
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": prompt_tokens + len(tokens),
        },
    }


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -9999.0


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a client opening dozens of connections at
    # once then has SYNs dropped and retried a second later, which reads as client slowness.
    request_queue_size = 128
    daemon_threads = True


class FakeLLMServer:
    """`with FakeLLMServer(responder) as server: ... server.base_url ... server.count`."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        latency: float = 0.0,
        capacity: int | None = None,
        capacity_retry_after: str | None = None,
    ) -> None:
        self.state = ServerState(
            responder or (lambda body: Reply(text="Yes")),
            latency=latency,
            capacity=capacity,
            capacity_retry_after=capacity_retry_after,
        )
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def count(self) -> int:
        with self.state.lock:
            return len(self.state.requests)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.requests)

    def queue(self, *faults: Fault | str) -> None:
        with self.state.lock:
            for fault in faults:
                self.state.faults.append(Fault(fault) if isinstance(fault, str) else fault)

    def __enter__(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
