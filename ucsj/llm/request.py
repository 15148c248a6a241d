"""A chat request and its content-addressed cache key (DESIGN.md, "The cache key")."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

# Bump when the meaning of a cached entry changes; old entries then stop matching.
CACHE_SCHEMA = 1
DEFAULT_SEED = 42
DEFAULT_TOP_LOGPROBS = 5


def canonical_json(obj: Any) -> str:
    """Sorted keys, UTF-8 (no ASCII escaping), compact separators."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class ChatRequest:
    """Everything that determines a chat completion's output.

    Not the base URL, API key, timeouts or concurrency: those do not change the answer, so a
    recording made against one server replays against any other.
    """

    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content) pairs, immutable so requests hash
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = DEFAULT_SEED
    stop: tuple[str, ...] = ()
    logprobs: bool = True
    top_logprobs: int = DEFAULT_TOP_LOGPROBS
    response_format: str | None = None  # e.g. "json_object"
    sample_index: int = 0  # distinguishes repeated samples when temperature > 0
    extra: tuple[tuple[str, Any], ...] = field(default=())

    @classmethod
    def chat(
        cls, model: str, messages: list[dict[str, str]] | list[tuple[str, str]], **params: Any
    ) -> ChatRequest:
        pairs = tuple(
            (m["role"], m["content"]) if isinstance(m, dict) else (m[0], m[1]) for m in messages
        )
        return cls(model=model, messages=pairs, **params)

    def without_logprobs(self) -> ChatRequest:
        return dataclasses.replace(self, logprobs=False, top_logprobs=0)

    def body(self) -> dict[str, Any]:
        """The JSON body sent to /chat/completions."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": r, "content": c} for r, c in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }
        if self.stop:
            body["stop"] = list(self.stop)
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = self.top_logprobs
        if self.response_format:
            body["response_format"] = {"type": self.response_format}
        body.update(dict(self.extra))
        return body

    def key_material(self) -> dict[str, Any]:
        """What the cache key hashes: schema version plus every output-changing parameter."""
        material = {"schema": CACHE_SCHEMA, **self.body()}
        if self.temperature > 0:
            material["sample_index"] = self.sample_index
        return material

    @functools.cached_property
    def key(self) -> str:
        return cache_key(self.key_material())


def cache_key(material: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the key material."""
    return hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()
