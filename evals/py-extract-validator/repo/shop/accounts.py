"""Customer accounts."""

import re

_EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")

_accounts = {}


def _valid_email(address):
    return bool(_EMAIL.match(address))


def register(email, name=""):
    """Create an account; the email is the login and must be valid and unused."""
    if not _valid_email(email):
        raise ValueError(f"not a valid email address: {email!r}")
    if email.lower() in _accounts:
        raise ValueError(f"an account for {email} already exists")
    account = {"email": email, "name": name}
    _accounts[email.lower()] = account
    return account
