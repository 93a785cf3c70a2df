"""Formatting integer cent amounts for receipts."""

SYMBOLS = {"USD": "$", "GBP": "\u00a3"}


def format_price(cents, currency="USD"):
    """``cents`` as a price: "$1,234.50", "-$2.50"; currencies without a symbol as "EUR 10.00"."""
    sign = "-" if cents < 0 else ""
    amount = f"{abs(cents) / 100}"
    symbol = SYMBOLS.get(currency)
    if symbol is None:
        return f"{sign}{currency} {amount}"
    return f"{sign}{symbol}{amount}"
