"""Newsletter subscriptions: addresses are stored trimmed and lower-cased."""

from shop.validators import is_valid_email

_subscribers = set()


def subscribe(address):
    address = address.strip().lower()
    if not is_valid_email(address):
        raise ValueError(f"not a valid email address: {address!r}")
    _subscribers.add(address)
    return address


def subscribers():
    return sorted(_subscribers)
