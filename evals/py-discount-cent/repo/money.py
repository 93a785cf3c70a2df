"""Money helpers: every amount is an int number of cents."""


def percent_of(cents, percent):
    """``percent`` % of ``cents``, rounded to the nearest cent (half a cent rounds up)."""
    return int(cents * percent / 100)


def format_cents(cents):
    """1234 -> "12.34", -5 -> "-0.05"."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
