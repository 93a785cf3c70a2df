"""Calls to the upstream API, retried with exponential backoff."""

import time

from settings import BACKOFF_S, MAX_RETRY, MAX_RETRY_DELAY_S


class GaveUp(Exception):
    """Every attempt failed."""


def backoff_delays(retries=MAX_RETRY):
    """Seconds to wait before each retry: BACKOFF_S, doubling, capped at MAX_RETRY_DELAY_S."""
    return [min(BACKOFF_S * 2**i, MAX_RETRY_DELAY_S) for i in range(retries)]


def call_with_retry(fn, sleep=time.sleep):
    """fn(), retried on OSError with the backoff delays; GaveUp once the retries are used up."""
    delays = backoff_delays()
    for attempt in range(MAX_RETRY + 1):
        try:
            return fn()
        except OSError as exc:
            if attempt == len(delays):
                raise GaveUp(f"{attempt + 1} attempts failed") from exc
            sleep(delays[attempt])
