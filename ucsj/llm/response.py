"""Normalise the chat-completion response shapes of OpenAI, vLLM, llama.cpp and Ollama."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class MalformedResponse(ValueError):
    """The endpoint answered 200 with a body that is not a usable chat completion."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the alternatives the server reported."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]  # (token, logprob), the generated token included


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    tokens: tuple[TokenLogprob, ...] | None  # None when the endpoint returned no logprobs
    model: str | None
    system_fingerprint: str | None
    usage: dict[str, int]

    @property
    def has_logprobs(self) -> bool:
        return bool(self.tokens)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def parse_completion(payload: Any) -> Completion:
    """Read a /chat/completions body; raise MalformedResponse when it has no usable answer."""
    if not isinstance(payload, dict):
        raise MalformedResponse("response body is not a JSON object")
    if "error" in payload and not payload.get("choices"):
        raise MalformedResponse(f"endpoint returned an error object: {_short(payload['error'])}")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("response has no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise MalformedResponse("choices[0] is not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0] has no message")
    text = message.get("content")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise MalformedResponse("message.content is not a string")
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    return Completion(
        text=text,
        finish_reason=choice.get("finish_reason"),
        tokens=_parse_logprobs(choice.get("logprobs")),
        model=payload.get("model") if isinstance(payload.get("model"), str) else None,
        system_fingerprint=payload.get("system_fingerprint"),
        usage={k: v for k, v in usage.items() if isinstance(v, int)},
    )


def _parse_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    if not isinstance(logprobs, dict):
        return None
    if isinstance(logprobs.get("content"), list):  # OpenAI, vLLM, llama.cpp, Ollama
        tokens = tuple(t for t in map(_content_token, logprobs["content"]) if t is not None)
    elif isinstance(logprobs.get("tokens"), list):  # legacy completions layout
        tokens = _legacy_tokens(logprobs)
    else:
        return None
    return tokens or None


def _content_token(item: Any) -> TokenLogprob | None:
    if not isinstance(item, dict) or not isinstance(item.get("token"), str):
        return None
    logprob = _finite(item.get("logprob"))
    if logprob is None:
        return None
    top: list[tuple[str, float]] = []
    for alt in item.get("top_logprobs") or []:
        if isinstance(alt, dict) and isinstance(alt.get("token"), str):
            alt_lp = _finite(alt.get("logprob"))
            if alt_lp is not None:
                top.append((alt["token"], alt_lp))
    if not any(tok == item["token"] for tok, _ in top):
        top.append((item["token"], logprob))
    return TokenLogprob(item["token"], logprob, tuple(top))


def _legacy_tokens(logprobs: dict[str, Any]) -> tuple[TokenLogprob, ...]:
    tokens = logprobs.get("tokens") or []
    lps = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    out = []
    for i, token in enumerate(tokens):
        lp = _finite(lps[i]) if i < len(lps) else None
        if not isinstance(token, str) or lp is None:
            continue
        alts = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        top = [(t, v) for t, v in ((t, _finite(v)) for t, v in alts.items()) if v is not None]
        if not any(t == token for t, _ in top):
            top.append((token, lp))
        out.append(TokenLogprob(token, lp, tuple(top)))
    return tuple(out)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    if math.isnan(value):
        return None
    return value  # -inf is a valid log-probability (probability 0)


def _short(obj: Any, limit: int = 200) -> str:
    text = obj.get("message", obj) if isinstance(obj, dict) else obj
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"
