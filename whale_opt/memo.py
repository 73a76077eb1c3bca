"""Values remembered per object identity, for what rounds on one cluster share.

A scheduler hands every round of an unchanged cluster the very same node
tuple (:meth:`whale_opt.scheduler.Scheduler.snapshot`), so what depends only
on the nodes (their NVLink topologies, which nodes a job shape may use) is
found again by the tuple's identity, without hashing a thousand node records
a round. The memo holds the objects it keys on, so an id is never reused
while remembered; it keeps the last few and is safe to share between threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

MEMO_SIZE = 32
"""Node tuples a memo keeps: a cluster's and its pools' (the openb cluster splits
into 16 pools). Each entry holds what was derived from those nodes, so a
service deciding for many large clusters keeps at most this many of them."""


class IdentityMemo(Generic[V]):
    """The values made from the last ``size`` objects, found by the object's identity."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[int, tuple[object, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: object, make: Callable[[], V]) -> V:
        """The value remembered for ``key`` itself, else ``make()`` (then remembered)."""
        with self._lock:
            found = self._items.get(id(key))
            if found is not None and found[0] is key:
                self._items.move_to_end(id(key))
                return found[1]
        value = make()
        with self._lock:
            self._items[id(key)] = (key, value)
            self._items.move_to_end(id(key))
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value
