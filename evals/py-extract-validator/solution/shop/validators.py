"""Input checks shared by the shop's modules."""

import re

_EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")


def is_valid_email(address):
    """A plausible email address: local part, "@", a domain with a dot and a 2+ letter suffix."""
    return bool(_EMAIL.match(address))
