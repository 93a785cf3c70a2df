"""Response-time statistics for the hourly report."""


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def summarize(durations_ms):
    """count, mean, median and max of ``durations_ms`` (any iterable).

    With no durations the count is 0 and mean, median and max are None.
    """
    values = list(durations_ms)
    return {
        "count": len(values),
        "mean": sum(values) / len(values),
        "median": median(values),
        "max": max(values),
    }
