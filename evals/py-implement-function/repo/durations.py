"""Human-friendly durations for the scheduler's config ("1h30m", "90s")."""


def parse_duration(text):
    """Seconds in a duration written as hours, minutes and seconds: "1h30m", "90s", "2h 15s".

    Each part is a whole number followed by one unit: h, m or s. Parts may be separated by
    spaces. Anything else (an empty string, a number without a unit, an unknown unit) raises
    ValueError.
    """
    raise NotImplementedError


def format_duration(seconds):
    """The shortest form parse_duration reads back: 5400 -> "1h30m", 0 -> "0s"."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts) or "0s"
