from lru import memoize


def test_memoize_calls_once_per_argument():
    calls = []

    @memoize(capacity=4)
    def square(n):
        calls.append(n)
        return n * n

    assert [square(3), square(3), square(4)] == [9, 9, 16]
    assert calls == [3, 4]
