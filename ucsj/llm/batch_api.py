"""`ucsj batch run`: answer a pending file through an endpoint's Files and Batches API.

OpenAI and a LiteLLM proxy serve `/v1/files` and `/v1/batches`: upload the input file,
create a batch, poll it, download its output file and its error file. The batch id is noted
beside the output (OUTPUT.batch.json) as soon as the batch exists, so an interrupted run
resumes polling the same batch instead of paying for a second one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ucsj import __version__
from ucsj.errors import BackendError
from ucsj.llm.batch import CHAT_URL

log = logging.getLogger("ucsj")

FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass
class BatchSettings:
    base_url: str
    api_key: str | None = None
    poll_s: float = 10.0  # first wait between polls; it grows to poll_max_s
    poll_max_s: float = 300.0
    completion_window: str = "24h"
    timeout: float = 300.0  # one HTTP call (an upload or download can be large)
    max_retries: int = 5


@dataclass
class BatchOutcome:
    batch_id: str
    status: str
    completed: int
    failed: int
    total: int
    lines: int  # output plus error lines written


def note_path(output: str | Path) -> Path:
    """Where the batch of `output` is noted (its id, for resuming and provenance)."""
    output = Path(output)
    return output.with_name(output.name + ".batch.json")


def noted_batch_id(output: str | Path) -> str | None:
    try:
        note = json.loads(note_path(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return note.get("batch_id") if isinstance(note, dict) else None


def run_batch(
    input_path: str | Path,
    output: str | Path,
    settings: BatchSettings,
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchOutcome:
    """Upload `input_path`, create a batch (or resume the one noted beside `output` for the
    same input), poll it to the end and write its output and error lines to `output`."""
    from ucsj.io import atomic_writer, file_sha256, refuse_overwriting_inputs, write_json

    input_path = Path(input_path)
    refuse_overwriting_inputs([output], [input_path])
    digest = file_sha256(input_path)
    with _Api(settings) as api:
        batch = _resumable(api, output, digest)
        if batch is None:
            file_id = api.upload(input_path)
            batch = api.json(
                "POST",
                "/batches",
                json={
                    "input_file_id": file_id,
                    "endpoint": CHAT_URL,
                    "completion_window": settings.completion_window,
                    "metadata": {"created_by": f"ucsj/{__version__}"},
                },
            )
            write_json(
                note_path(output),
                {"batch_id": batch["id"], "input": str(input_path), "input_sha256": digest},
            )
            log.info("created batch %s", batch["id"])
        delay = settings.poll_s
        while batch.get("status") not in FINAL:
            if on_progress is not None:
                on_progress(batch)
            sleep(delay)
            delay = min(settings.poll_max_s, delay * 1.5)
            batch = api.json("GET", f"/batches/{batch['id']}")
        if on_progress is not None:
            on_progress(batch)
        lines = 0
        with atomic_writer(output, "wb") as out:
            for key in ("output_file_id", "error_file_id"):
                if batch.get(key):
                    content = api.content(batch[key])
                    if content and not content.endswith(b"\n"):
                        content += b"\n"
                    out.write(content)
                    lines += content.count(b"\n")
    counts = batch.get("request_counts") or {}
    outcome = BatchOutcome(
        batch["id"],
        batch["status"],
        int(counts.get("completed", 0)),
        int(counts.get("failed", 0)),
        int(counts.get("total", 0)),
        lines,
    )
    if batch["status"] != "completed":
        errors = (batch.get("errors") or {}).get("data") or []
        detail = "; ".join(str(e.get("message", e)) for e in errors[:3]) if errors else ""
        raise BackendError(
            f"batch {batch['id']} ended {batch['status']}"
            + (f": {detail}" if detail else "")
            + f"; {lines} answer lines written to {output}"
        )
    return outcome


def _resumable(api: _Api, output: str | Path, digest: str) -> dict[str, Any] | None:
    """The batch noted beside `output` for this same input, unless it ended without output."""
    try:
        note = json.loads(note_path(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or note.get("input_sha256") != digest:
        return None
    batch = api.json("GET", f"/batches/{note['batch_id']}")
    if batch.get("status") in ("failed", "expired", "cancelled") and not batch.get(
        "output_file_id"
    ):
        return None  # nothing to collect: start a new batch
    log.info("resuming batch %s (%s)", batch["id"], batch.get("status"))
    return batch


class _Api:
    """The few Files and Batches calls, with retries on transient failures."""

    def __init__(self, settings: BatchSettings) -> None:
        headers = {"User-Agent": f"ucsj/{__version__}"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self.settings = settings
        self.base = settings.base_url.rstrip("/")
        self.http = httpx.Client(headers=headers, timeout=settings.timeout)

    def __enter__(self) -> _Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def upload(self, path: Path) -> str:
        with path.open("rb") as handle:
            reply = self._call(
                "POST",
                "/files",
                data={"purpose": "batch"},
                files={"file": (path.name, handle, "application/jsonl")},
                rewind=handle,
            )
        return self._decode(reply)["id"]

    def json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return self._decode(self._call(method, path, **kwargs))

    def content(self, file_id: str) -> bytes:
        return self._call("GET", f"/files/{file_id}/content").content

    def _decode(self, reply: httpx.Response) -> dict[str, Any]:
        try:
            body = reply.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "id" not in body:
            raise BackendError(f"{reply.request.url.path}: the endpoint answered no object id")
        return body

    def _call(self, method: str, path: str, *, rewind: Any = None, **kwargs: Any) -> httpx.Response:
        attempt = 0
        while True:
            if rewind is not None:
                rewind.seek(0)
            try:
                reply = self.http.request(method, self.base + path, **kwargs)
                if reply.status_code < 400:
                    return reply
                reason = f"HTTP {reply.status_code}: {self._redact(reply.text[:300])}"
                if reply.status_code not in RETRY_STATUS:
                    raise BackendError(f"{method} {path}: {reason}")
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}"
            if attempt >= self.settings.max_retries:
                raise BackendError(f"{method} {path}: {reason}; gave up after {attempt + 1} tries")
            attempt += 1
            time.sleep(min(30.0, 0.5 * 2**attempt))

    def _redact(self, text: str) -> str:
        from ucsj.redact import redact

        return redact(" ".join(text.split()), [self.settings.api_key])
