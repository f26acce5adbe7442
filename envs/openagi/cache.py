"""A bounded LRU cache of intermediate expert outputs, keyed by (sample, plan prefix).

RL samples many plans that share prefixes ("Image Denoising, ..."), and the same plan again and
again; each expert output is computed once per (sample, prefix) while it stays in the cache.
Memory is bounded by an estimate of the bytes held, not by an entry count, because an image and a
label differ by four orders of magnitude.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

_MISSING = object()


def nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 112
    if isinstance(value, str):
        return len(value) + 49
    return sys.getsizeof(value)


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class ExecutionCache:
    def __init__(self, max_bytes: int = 512 * 2**20):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes={max_bytes}: expected a positive byte budget")
        self.max_bytes = max_bytes
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0

    def get(self, key: Hashable, default: Any = _MISSING) -> Any:
        item = self._data.get(key, _MISSING)
        if item is _MISSING:
            self._misses += 1
            if default is _MISSING:
                raise KeyError(key)
            return default
        self._hits += 1
        self._data.move_to_end(key)
        return item[0]

    def lookup(self, key: Hashable) -> tuple[bool, Any]:
        item = self._data.get(key, _MISSING)
        if item is _MISSING:
            self._misses += 1
            return False, None
        self._hits += 1
        self._data.move_to_end(key)
        return True, item[0]

    def put(self, key: Hashable, value: Any, size: int | None = None) -> None:
        """Remember ``value``; ``size`` (default: the value's bytes) is what it counts against the
        budget -- give it where the key outweighs the value (a score keyed by a plan's text)."""
        size = nbytes(value) if size is None else size
        if size > self.max_bytes:
            return
        old = self._data.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._data[key] = (value, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, s) = self._data.popitem(last=False)
            self._bytes -= s
            self._evictions += 1

    def clear(self) -> None:
        self._data.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def stats(self) -> CacheStats:
        return CacheStats(self._hits, self._misses, self._evictions, len(self._data), self._bytes)
