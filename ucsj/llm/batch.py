"""Batch round trips: pending requests out as OpenAI Batch API input, batch answers back in.

`--cache collect` writes every request the cache cannot answer as one input line
(`{"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions", "body": REQUEST}`, KEY
being the request's cache key). Any batch engine answers the file (the OpenAI Batch API,
`vllm run-batch`, a LiteLLM proxy, Ray); `import_batch` pairs its output lines with the input's
requests, checks each key and stores the successful answers as ordinary cache entries.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ucsj import __version__
from ucsj.errors import InputError
from ucsj.llm.cache import ResponseCache, make_entry
from ucsj.llm.request import CACHE_SCHEMA, ChatRequest, cache_key
from ucsj.llm.response import MalformedResponse, parse_completion

CHAT_URL = "/v1/chat/completions"
IMPORT_CHUNK = 2000  # entries stored per SQLite transaction
MAX_SAMPLE_INDEX = 1024  # temperature > 0: the sample indexes tried to re-derive a key


def batch_line(request: ChatRequest) -> str:
    """The Batch API input line of `request` (custom_id: its cache key)."""
    line = {"custom_id": request.key, "method": "POST", "url": CHAT_URL, "body": request.body()}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


class PendingWriter:
    """Collects a run's missing requests, each once, into a Batch API input file.

    Lines stream to a temporary file beside the target as requests are found (a million
    pending requests are never held in memory); `finish` renames it into place, `discard`
    removes it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._seen: set[str] = set()
        self._stack: contextlib.ExitStack | None = None
        self._out: IO[str] | None = None

    def add(self, request: ChatRequest) -> None:
        key = request.key
        if key in self._seen:
            return
        self._seen.add(key)
        self._open().write(batch_line(request))
        self.count += 1

    def finish(self) -> int:
        """Write the file (empty when nothing is pending); return how many lines it holds."""
        self._open()
        assert self._stack is not None
        self._stack.close()
        self._stack = self._out = None
        return self.count

    def discard(self) -> None:
        if self._stack is not None:
            self._stack.__exit__(RuntimeError, RuntimeError("discarded"), None)
            self._stack = self._out = None

    def _open(self) -> IO[str]:
        if self._out is None:
            from ucsj.io import atomic_writer

            self._stack = contextlib.ExitStack()
            self._out = self._stack.enter_context(atomic_writer(self.path))
        return self._out


@dataclass
class BatchImport:
    """What `import_batch` did: stored (new entries), known (already cached), failed lines
    as (where, custom_id, reason), and requests that no output line answered."""

    stored: int = 0
    known: int = 0
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unanswered


def import_batch(
    cache: ResponseCache,
    output: str | Path,
    requests: str | Path,
    *,
    batch_id: str | None = None,
) -> BatchImport:
    """Store the successful answers of a batch `output` file whose input was `requests`.

    Every answer is checked: its custom_id must name a request of the input, and that
    request must re-hash to the custom_id. Failed lines (an HTTP error, an `error` object, a
    body that is no chat completion, an unknown id) are listed and not stored, so the next
    `--cache collect` asks for them again. The first recording of a key wins, as in a run."""
    index = _index_requests(requests)
    result = BatchImport()
    answered: set[str] = set()
    pending: list[dict[str, Any]] = []
    with open(requests, "rb") as inputs:
        for where, line in _output_lines(output):
            entry, reason, custom_id = _entry_of(line, index, inputs, str(requests), batch_id)
            if custom_id is not None and custom_id in index:
                answered.add(custom_id)
            if entry is None:
                result.failed.append((where, custom_id or "?", reason or "unusable line"))
                continue
            pending.append(entry)
            if len(pending) >= IMPORT_CHUNK:
                _store(cache, pending, result)
        _store(cache, pending, result)
    result.unanswered = [k for k in index if k not in answered]
    return result


def _store(cache: ResponseCache, entries: list[dict[str, Any]], result: BatchImport) -> None:
    new = cache.add_many(entries)
    result.stored += new
    result.known += len(entries) - new
    entries.clear()


def _index_requests(path: str | Path) -> dict[str, int]:
    """custom_id -> byte offset of its line in the input file (bodies are read when needed)."""
    index: dict[str, int] = {}
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below; offsets need binary reads)
    except OSError as exc:
        raise InputError(f"cannot read the requests file: {exc.strerror}", path=str(path)) from None
    with handle:
        offset = 0
        for number, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            try:
                custom_id = json.loads(raw)["custom_id"]
            except (ValueError, KeyError, TypeError):
                raise InputError(
                    "not a Batch API input line (JSON with a custom_id)",
                    path=str(path),
                    line=number,
                ) from None
            if not isinstance(custom_id, str):
                raise InputError("custom_id is not a string", path=str(path), line=number)
            index.setdefault(custom_id, start)
    return index


def _output_lines(path: str | Path):
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read the batch output: {exc.strerror}", path=str(path)) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield f"{path}:{number}", raw


def _entry_of(
    raw: bytes,
    index: dict[str, int],
    inputs: Any,
    requests_name: str,
    batch_id: str | None,
) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(entry, None, custom_id) for a usable answer, else (None, reason, custom_id); a reason
    quoting the engine's text has any credential in it masked."""
    try:
        line = json.loads(raw)
    except ValueError:
        return None, "invalid JSON", None
    if not isinstance(line, dict):
        return None, "not a JSON object", None
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        return None, "no custom_id", None
    offset = index.get(custom_id)
    if offset is None:
        return None, f"no request with this custom_id in {requests_name}", custom_id
    problem = _answer_problem(line)
    if problem:
        from ucsj.redact import redact

        return None, redact(problem), custom_id
    inputs.seek(offset)
    body = json.loads(inputs.readline()).get("body")
    material = _key_material(body, custom_id)
    if material is None:
        return None, f"its request in {requests_name} does not hash to this custom_id", custom_id
    response = line["response"]
    payload = response["body"]
    try:
        completion = parse_completion(payload)
    except MalformedResponse as exc:
        return None, f"the response is not a chat completion ({exc})", custom_id
    meta = {
        "requested_model": body.get("model"),
        "model": completion.model,
        "system_fingerprint": completion.system_fingerprint,
        "usage": completion.usage,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "endpoint": "batch",
        "batch_id": batch_id,
        "batch_request_id": line.get("id"),
        "request_id": response.get("request_id"),
        "has_logprobs": completion.has_logprobs,
        "ucsj": __version__,
    }
    return make_entry(material, payload, meta, key=custom_id), None, custom_id


def _answer_problem(line: dict[str, Any]) -> str | None:
    error = line.get("error")
    if error:
        if isinstance(error, dict):
            text = error.get("message") or json.dumps(error, ensure_ascii=False)
            code = error.get("code")
            return f"error {code}: {text}" if code else f"error: {text}"
        return f"error: {error}"
    response = line.get("response")
    if not isinstance(response, dict):
        return "no response"
    status = response.get("status_code")
    if status != 200:
        body = response.get("body")
        message = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message", message)
        return f"HTTP {status}: {' '.join(str(message).split())[:300]}"
    if not isinstance(response.get("body"), dict):
        return "the response has no body"
    return None


def _key_material(body: Any, custom_id: str) -> dict[str, Any] | None:
    """The cache key material of a request body, if it hashes to `custom_id`. A request with
    temperature > 0 carries its sample index in the key only, so the index is searched."""
    if not isinstance(body, dict):
        return None
    material = {"schema": CACHE_SCHEMA, **body}
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and temperature > 0:
        for index in range(MAX_SAMPLE_INDEX):
            candidate = {**material, "sample_index": index}
            if cache_key(candidate) == custom_id:
                return candidate
        return None
    return material if cache_key(material) == custom_id else None
