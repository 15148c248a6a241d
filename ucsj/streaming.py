"""Bounded concurrent work over a stream, results in input order."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to `size` consecutive items (itertools.batched arrives in Python 3.12)."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


@dataclass(frozen=True)
class Done:
    """An item whose result is already known: it is passed through without a task."""

    value: Any


async def in_order(
    items: Iterable[Any], work: Callable[[Any], Awaitable[Any]], window: int
) -> AsyncIterator[Any]:
    """Run `work` on up to `window` items at once; yield the results in input order.
    `Done` items yield their value in their place, without creating a task."""
    pending: deque[asyncio.Future[Any]] = deque()
    try:
        for item in items:
            if isinstance(item, Done):
                if not pending:
                    yield item.value
                    continue
                future = asyncio.get_running_loop().create_future()
                future.set_result(item.value)
                pending.append(future)
            else:
                pending.append(asyncio.ensure_future(work(item)))
            if len(pending) >= window:
                yield await pending.popleft()
        while pending:
            yield await pending.popleft()
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
