"""Small text helpers for the CLI's table output."""


def truncate(text, limit, suffix="..."):
    """``text`` cut to at most ``limit`` characters, ending in ``suffix`` when it was cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(suffix))] + suffix


def pad(text, width):
    """``text`` truncated or right-padded with spaces to exactly ``width`` characters."""
    return truncate(text, width).ljust(width)
