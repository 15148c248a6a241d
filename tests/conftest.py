from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeserver import FakeLLMServer

from ucsj.cli import main
from ucsj.llm import CacheMode, LLMClient, LLMSettings

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def server():
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def make_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def make(base_url: str, **overrides) -> LLMSettings:
        values = dict(
            model="test-model-2024-01-01",
            base_url=base_url,
            cache_dir=tmp_path / "cache",
            cache_mode=CacheMode.READWRITE,
            backoff_base=0.01,
            backoff_max=0.05,
            timeout=5.0,
            max_retries=3,
            concurrency=4,
        )
        values.update(overrides)
        return LLMSettings(**values)

    return make


def run_complete(settings: LLMSettings, *requests, **kwargs):
    """Send requests through a fresh client; return (completions or exceptions, stats)."""

    async def go():
        async with LLMClient(settings) as client:
            results = await asyncio.gather(
                *(client.complete(r, **kwargs) for r in requests), return_exceptions=True
            )
            return results, client.stats

    return asyncio.run(go())


def ucsj(*args: str) -> int:
    """Run the CLI in-process; return its exit code."""
    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
