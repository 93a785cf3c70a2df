"""Customer accounts."""

from shop.validators import is_valid_email

_accounts = {}


def register(email, name=""):
    """Create an account; the email is the login and must be valid and unused."""
    if not is_valid_email(email):
        raise ValueError(f"not a valid email address: {email!r}")
    if email.lower() in _accounts:
        raise ValueError(f"an account for {email} already exists")
    account = {"email": email, "name": name}
    _accounts[email.lower()] = account
    return account
