"""Answer a ucsj pending file with Ray Data, over one or several OpenAI-compatible endpoints.

    pip install 'ucsj[ray]'
    ucsj score data.jsonl --criteria criteria.json --cache collect --pending pending.jsonl
    python examples/ray_batch.py pending.jsonl -o answers.jsonl \\
        --endpoint http://node1:8000/v1 --endpoint http://node2:8000/v1
    ucsj cache import-batch answers.jsonl --requests pending.jsonl

Each input line (an OpenAI Batch API request) goes to the endpoint its custom_id hashes to, so
a rerun spreads the same requests the same way; Ray spreads the lines over its workers (on a
cluster, `ray.init(address="auto")` with --address auto). The output is the Batch API output
format that `ucsj cache import-batch` reads: `custom_id`, `response` (`status_code`,
`request_id`, `body`) and `error`. A request that fails for good is written with its status
or error, not dropped: import-batch lists it and the next collect asks for it again.

For GPUs, `vllm run-batch -i pending.jsonl -o answers.jsonl` answers the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def endpoint_for(custom_id: str, endpoints: list[str]) -> str:
    """The endpoint a request goes to: stable across runs and machines."""
    digest = hashlib.sha256(custom_id.encode("utf-8")).digest()
    return endpoints[int.from_bytes(digest[:8], "big") % len(endpoints)]


class Answerer:
    """A Ray Data map_batches worker: answers a batch of input lines, `threads` at a time."""

    def __init__(
        self, endpoints: list[str], threads: int, timeout: float, retries: int, key: str | None
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.http = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=threads, max_keepalive_connections=threads),
        )
        self.pool = ThreadPoolExecutor(threads)
        self.retries = retries

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"text": list(self.pool.map(self.answer, batch["text"]))}

    def answer(self, text: str) -> str:
        request = json.loads(text)
        custom_id = request["custom_id"]
        url = endpoint_for(custom_id, self.endpoints) + "/chat/completions"
        reason = "not sent"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(30.0, 0.5 * 2**attempt))
            try:
                reply = self.http.post(url, json=request["body"])
            except Exception as exc:  # a transport error: retried, then written as an error
                reason = f"{type(exc).__name__}: {exc}"
                continue
            if reply.status_code in RETRY_STATUS and attempt < self.retries:
                continue
            try:
                body: Any = reply.json()
            except ValueError:
                body = {"error": {"message": reply.text[:300]}}
            return _line(
                custom_id,
                {
                    "status_code": reply.status_code,
                    "request_id": reply.headers.get("x-request-id"),
                    "body": body,
                },
                None,
            )
        return _line(custom_id, None, {"code": "request_failed", "message": reason})


def _line(custom_id: str, response: dict[str, Any] | None, error: dict[str, Any] | None) -> str:
    line_id = "ray_req_" + hashlib.sha256(custom_id.encode()).hexdigest()[:24]
    line = {"id": line_id, "custom_id": custom_id, "response": response, "error": error}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def run(
    pending: Path,
    output: Path,
    endpoints: list[str],
    *,
    workers: int = 2,
    threads: int = 8,
    timeout: float = 300.0,
    retries: int = 5,
    batch_size: int = 64,
) -> int:
    """Answer every line of `pending` into `output` (written atomically); return the count.
    Ray must be initialised (ray.init) by the caller."""
    import ray

    dataset = ray.data.read_text(str(pending)).filter(lambda row: bool(row["text"].strip()))
    answered = dataset.map_batches(
        Answerer,
        fn_constructor_args=(
            endpoints,
            threads,
            timeout,
            retries,
            os.environ.get("OPENAI_API_KEY"),
        ),
        batch_size=batch_size,
        concurrency=workers,
        # the workers wait on the network: a whole CPU each would leave none to read the file
        num_cpus=0.25,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for row in answered.iter_rows():
                out.write(row["text"] + "\n")
                count += 1
        os.replace(tmp, output)
    except BaseException:
        os.unlink(tmp)
        raise
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pending", type=Path, help="a --pending file from --cache collect")
    parser.add_argument("-o", "--output", type=Path, required=True, help="Batch API output")
    parser.add_argument(
        "--endpoint",
        action="append",
        required=True,
        help="an OpenAI-compatible base URL (…/v1); repeat for several",
    )
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (actors)")
    parser.add_argument("--threads", type=int, default=8, help="requests in flight per worker")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    parser.add_argument("--address", default=None, help="a Ray cluster (auto), else local")
    args = parser.parse_args(argv)
    try:
        import ray
    except ImportError:
        print("ray_batch.py needs Ray: pip install 'ucsj[ray]'", file=sys.stderr)
        return 2
    if not args.pending.is_file():
        print(f"{args.pending}: no such file", file=sys.stderr)
        return 2
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    try:
        count = run(
            args.pending,
            args.output,
            args.endpoint,
            workers=args.workers,
            threads=args.threads,
            timeout=args.timeout,
        )
    finally:
        ray.shutdown()
    print(f"wrote {count} answers to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
