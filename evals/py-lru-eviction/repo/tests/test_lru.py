import pytest

from lru import LRUCache


def test_keeps_up_to_capacity():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.keys() == ["a", "b"] and len(cache) == 2


def test_evicts_the_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert cache.keys() == ["b", "c"]


def test_get_refreshes_recency():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "a" in cache and "b" not in cache


def test_updating_a_key_does_not_evict():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    assert cache.keys() == ["b", "a"] and cache.get("a") == 10
    assert cache.stats()["evictions"] == 0


def test_stats():
    cache = LRUCache(1)
    cache.put("a", 1)
    cache.get("a")
    cache.get("b")
    cache.put("b", 2)
    assert cache.stats() == {"hits": 1, "misses": 1, "evictions": 1}


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)
