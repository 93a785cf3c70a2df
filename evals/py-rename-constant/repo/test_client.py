import pytest
from client import GaveUp, backoff_delays, call_with_retry
from settings import MAX_RETRIES


def flaky(failures, result="ok"):
    calls = []

    def fn():
        calls.append(1)
        if len(calls) <= failures:
            raise ConnectionError("upstream down")
        return result

    return fn, calls


def test_default_is_three_retries():
    assert MAX_RETRIES == 3
    assert backoff_delays() == [0.5, 1.0, 2.0]


def test_recovers_after_failures():
    slept = []
    fn, calls = flaky(2)
    assert call_with_retry(fn, sleep=slept.append) == "ok"
    assert len(calls) == 3 and slept == [0.5, 1.0]


def test_gives_up_after_max_retries():
    slept = []
    fn, calls = flaky(99)
    with pytest.raises(GaveUp):
        call_with_retry(fn, sleep=slept.append)
    assert len(calls) == MAX_RETRIES + 1 and slept == [0.5, 1.0, 2.0]
