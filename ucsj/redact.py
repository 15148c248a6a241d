"""Keep credentials out of every message: URL userinfo, the API key in any letter case, and
anything shaped like a bearer key in texts that come from a server."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#]*@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{6,}")
# OpenAI- and Anthropic-style secret keys (sk-..., sk-proj-..., sk-ant-...).
_KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_\-]{12,}")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` without URL credentials, bearer-shaped tokens and the given secrets (matched
    in any letter case)."""
    for secret in (*secrets, os.environ.get("OPENAI_API_KEY")):
        if secret and len(secret) >= 4:
            text = re.sub(re.escape(secret), MASK, text, flags=re.IGNORECASE)
    text = _USERINFO.sub(rf"\1{MASK}@", text)
    text = _BEARER.sub(rf"\1{MASK}", text)
    return _KEY_SHAPED.sub(MASK, text)


def redact_url(url: str) -> str:
    """`url` with any user name and password replaced (scheme, host, port and path kept)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{MASK}@{host}"))
