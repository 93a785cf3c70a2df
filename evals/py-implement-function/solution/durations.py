"""Human-friendly durations for the scheduler's config ("1h30m", "90s")."""

import re

_PART = re.compile(r"(\d+)([hms])")
_SECONDS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Seconds in a duration written as hours, minutes and seconds: "1h30m", "90s", "2h 15s".

    Each part is a whole number followed by one unit: h, m or s. Parts may be separated by
    spaces. Anything else (an empty string, a number without a unit, an unknown unit) raises
    ValueError.
    """
    parts = _PART.findall(text)
    if not parts or _PART.sub("", text).strip():
        raise ValueError(f"not a duration: {text!r} (use forms like 1h30m, 90s)")
    return sum(int(number) * _SECONDS[unit] for number, unit in parts)


def format_duration(seconds):
    """The shortest form parse_duration reads back: 5400 -> "1h30m", 0 -> "0s"."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts) or "0s"
