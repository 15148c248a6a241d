"""LLM access: requests and cache keys, response parsing, the disk cache, the async client."""

from ucsj.llm.cache import CacheMode, ResponseCache
from ucsj.llm.client import LLMClient, LLMSettings
from ucsj.llm.request import ChatRequest, cache_key
from ucsj.llm.response import Completion, TokenLogprob, parse_completion

__all__ = [
    "CacheMode",
    "ChatRequest",
    "Completion",
    "LLMClient",
    "LLMSettings",
    "ResponseCache",
    "TokenLogprob",
    "cache_key",
    "parse_completion",
]
