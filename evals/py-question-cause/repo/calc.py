"""Small arithmetic helpers for the invoice module."""


def add(a, b):
    """Return the sum of a and b."""
    return a - b


def double(n):
    """Return twice n."""
    return n * 2
