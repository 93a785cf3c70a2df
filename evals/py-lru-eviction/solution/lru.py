"""A least-recently-used cache and a memoizing decorator built on it."""

from collections import OrderedDict
from functools import wraps

_MISSING = object()


class LRUCache:
    """At most ``capacity`` entries; adding one more evicts the least recently used.

    Both get() and put() count as a use. keys() lists the entries from least to most recently used.
    """

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._data = OrderedDict()
        self._hits = self._misses = self._evictions = 0

    def get(self, key, default=None):
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self._misses += 1
            return default
        self._hits += 1
        self._data.move_to_end(key)
        return value

    def put(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)
            self._evictions += 1

    def keys(self):
        return list(self._data.keys())

    def stats(self):
        return {"hits": self._hits, "misses": self._misses, "evictions": self._evictions}

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)


def memoize(capacity=128):
    """Cache a function's results by its positional arguments."""

    def decorate(func):
        cache = LRUCache(capacity)

        @wraps(func)
        def wrapper(*args):
            result = cache.get(args, _MISSING)
            if result is _MISSING:
                result = func(*args)
                cache.put(args, result)
            return result

        wrapper.cache = cache
        return wrapper

    return decorate
