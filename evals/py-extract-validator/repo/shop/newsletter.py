"""Newsletter subscriptions: addresses are stored trimmed and lower-cased."""

import re

_subscribers = set()


def _valid_email(address):
    return re.match(r"^[^@\s]+@[^@\s]+$", address) is not None


def subscribe(address):
    address = address.strip().lower()
    if not _valid_email(address):
        raise ValueError(f"not a valid email address: {address!r}")
    _subscribers.add(address)
    return address


def subscribers():
    return sorted(_subscribers)
