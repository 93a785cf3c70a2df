"""Small text helpers for the CLI's table output."""


def truncate(text, limit):
    """``text`` cut to at most ``limit`` characters, ending in "..." when it was cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 3)] + "..."


def pad(text, width):
    """``text`` truncated or right-padded with spaces to exactly ``width`` characters."""
    return truncate(text, width).ljust(width)
