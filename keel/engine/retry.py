"""Backoff arithmetic for engine retries, kept pure so it can be tested as a table.

keel does its own retries instead of the SDK's because it must decide per failure whether a
retry is safe (a stream cut halfway through a tool call is discarded, a 401 never retried).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping

# A server asking for more than this is treated as asking for this: a coding session that waits
# ten minutes on one 429 looks hung to the person watching it.
MAX_RETRY_AFTER_S = 60.0


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None,
                  rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 for the first retry).

    Full jitter (uniform over [0, min(cap, base * 2**attempt)]) spreads clients that failed
    together. A server's Retry-After wins over our own guess because it knows its own load.
    """
    if retry_after is not None and math.isfinite(retry_after):
        return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
    if retry_after is not None:  # +inf: the server asked for "never"; wait the longest we allow
        return MAX_RETRY_AFTER_S
    ceiling = min(cap, base * (2 ** min(attempt, 62)))
    if ceiling <= 0:
        return 0.0
    return (rng or random).uniform(0.0, ceiling)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, or None when it did not say (or said nonsense).

    Honours ``retry-after-ms`` (OpenAI-style), then ``Retry-After`` as delta-seconds or an
    HTTP date. ``headers`` may be any case-insensitive or lower-cased mapping.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = _as_seconds(lowered.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _as_seconds(value)
    if seconds is not None:
        return seconds
    try:
        parsed = email.utils.parsedate_tz(value.strip())
        if parsed is None:
            return None
        when = email.utils.mktime_tz(parsed)
    except (TypeError, ValueError, OverflowError):
        return None
    return max(0.0, float(when) - (time.time() if now is None else now))


def _as_seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds
