"""Money helpers: every amount is an int number of cents."""


def percent_of(cents, percent):
    """``percent`` % of ``cents``, rounded to the nearest cent (half a cent rounds up)."""
    # int() cut 10.047 down to 10.04; the exact product in hundredths, then half up, in integers
    # so that no float error can move a value that sits exactly on a half.
    hundredths = cents * percent
    return (hundredths + 50) // 100


def format_cents(cents):
    """1234 -> "12.34", -5 -> "-0.05"."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
