"""Batch engines for tests: a function that answers a Batch API input file through the loopback
chat server, and a loopback fake of the Files and Batches API (/v1/files, /v1/batches)."""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from fakeserver import Reply, completion_body


def output_line(custom_id: str, status: int, body: Any, n: int) -> str:
    line = {
        "id": f"batch_req_{n}",
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": f"req_{n}", "body": body},
        "error": None,
    }
    return json.dumps(line, ensure_ascii=False) + "\n"


def error_line(custom_id: str, code: str, message: str, n: int) -> str:
    line = {
        "id": f"batch_req_{n}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }
    return json.dumps(line) + "\n"


def answer_pending(
    pending: Path,
    output: Path,
    base_url: str,
    fail: Callable[[int, str], str | None] = lambda n, key: None,
) -> list[str]:
    """Answer every line of `pending` by POSTing its body to the chat server, in reverse order
    (a batch's output order is not its input's). `fail(n, custom_id)` returns "http" or
    "error" to make that line fail. Returns the custom_ids that failed."""
    lines = [json.loads(t) for t in pending.read_text(encoding="utf-8").splitlines() if t]
    failed = []
    with httpx.Client(base_url=base_url, timeout=10) as http, output.open("w") as out:
        for n, line in reversed(list(enumerate(lines))):
            kind = fail(n, line["custom_id"])
            if kind == "http":
                failed.append(line["custom_id"])
                out.write(
                    output_line(line["custom_id"], 500, {"error": {"message": "overloaded"}}, n)
                )
            elif kind == "error":
                failed.append(line["custom_id"])
                out.write(error_line(line["custom_id"], "batch_expired", "not processed", n))
            else:
                reply = http.post("/chat/completions", json=line["body"])
                out.write(output_line(line["custom_id"], 200, reply.json(), n))
    return failed


@dataclass
class BatchState:
    responder: Callable[[dict[str, Any]], Reply]
    polls_to_finish: int = 2  # status polls answered "in_progress" before "completed"
    fail_ids: set[str] = field(default_factory=set)  # custom_ids that go to the error file
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)
    uploads: int = 0
    auth: list[str | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: Any = field(default_factory=itertools.count)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: BatchState

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.state.auth.append(self.headers.get("Authorization"))
        with self.state.lock:
            if self.path == "/v1/files":
                content = _multipart_file(self.headers["Content-Type"], raw)
                file_id = f"file-{next(self.state.ids)}"
                self.state.files[file_id] = content
                self.state.uploads += 1
                self._json(200, {"id": file_id, "object": "file", "purpose": "batch"})
            elif self.path == "/v1/batches":
                body = json.loads(raw)
                if body.get("input_file_id") not in self.state.files:
                    self._json(400, {"error": {"message": "no such file"}})
                    return
                batch_id = f"batch_{next(self.state.ids)}"
                batch = {
                    "id": batch_id,
                    "object": "batch",
                    "endpoint": body["endpoint"],
                    "input_file_id": body["input_file_id"],
                    "status": "validating",
                    "request_counts": {"total": 0, "completed": 0, "failed": 0},
                }
                self.state.batches[batch_id] = batch
                self.state.polls[batch_id] = 0
                self._json(200, batch)
            else:
                self._json(404, {"error": {"message": "not found"}})

    def do_GET(self) -> None:
        with self.state.lock:
            parts = self.path.strip("/").split("/")
            if parts[:2] == ["v1", "batches"] and len(parts) == 3:
                batch = self.state.batches.get(parts[2])
                if batch is None:
                    self._json(404, {"error": {"message": "no such batch"}})
                    return
                self.state.polls[batch["id"]] += 1
                if self.state.polls[batch["id"]] >= self.state.polls_to_finish:
                    self._finish(batch)
                elif batch["status"] == "validating":
                    batch["status"] = "in_progress"
                self._json(200, batch)
            elif parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
                content = self.state.files.get(parts[2])
                if content is None:
                    self._json(404, {"error": {"message": "no such file"}})
                    return
                self._send(200, content, "application/jsonl")
            else:
                self._json(404, {"error": {"message": "not found"}})

    def _finish(self, batch: dict[str, Any]) -> None:
        if batch["status"] == "completed":
            return
        lines = self.state.files[batch["input_file_id"]].decode().splitlines()
        answers, errors = [], []
        for n, text in enumerate(lines):
            request = json.loads(text)
            if request["custom_id"] in self.state.fail_ids:
                errors.append(
                    output_line(request["custom_id"], 400, {"error": {"message": "bad"}}, n)
                )
                continue
            body = completion_body(request["body"], self.state.responder(request["body"]))
            answers.append(output_line(request["custom_id"], 200, body, n))
        batch["output_file_id"] = self._store("".join(answers))
        batch["error_file_id"] = self._store("".join(errors)) if errors else None
        batch["status"] = "completed"
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(answers),
            "failed": len(errors),
        }

    def _store(self, text: str) -> str:
        file_id = f"file-{next(self.state.ids)}"
        self.state.files[file_id] = text.encode()
        return file_id

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _multipart_file(content_type: str, raw: bytes) -> bytes:
    """The `file` part of a multipart/form-data body."""
    boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
    for part in raw.split(b"--" + boundary):
        head, _, body = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return body.removesuffix(b"\r\n")
    raise ValueError("no file part")


class FakeBatchServer:
    """`with FakeBatchServer(responder) as server: ... server.base_url ... server.state`."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply], **options: Any) -> None:
        self.state = BatchState(responder, **options)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeBatchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
