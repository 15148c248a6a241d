"""`--shard K/N`: split one data file over N machines without coordination.

A sample belongs to shard K (0 <= K < N) when the SHA-256 of its id, read as a number, is K
modulo N: the same on every machine, operating system and Python version (Python's own hash()
of a string changes from process to process).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ucsj.errors import InputError

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # K, from 0
    count: int  # N

    def takes(self, sample_id: str) -> bool:
        digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(spec: str) -> Shard:
    """ "K/N" -> Shard(K, N), with K counted from 0 as array job indexes are."""
    match = _SPEC.match(spec)
    if not match:
        raise InputError(f"--shard must be K/N (e.g. 0/4), not {spec!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or index >= count:
        raise InputError(f"--shard {spec}: K counts from 0 and must be below N (0/{count or 1})")
    return Shard(index, count)
