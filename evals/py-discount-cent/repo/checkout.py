"""The checkout: line items, a discount code, and the total the customer pays."""

from money import format_cents, percent_of

DISCOUNTS = {"SPRING15": 15, "STAFF30": 30, "WELCOME5": 5}


def subtotal(lines):
    """``lines``: (unit price in cents, quantity) pairs."""
    return sum(price * qty for price, qty in lines)


def discount(lines, code=None):
    """What the discount code takes off the subtotal, in cents (0 without a known code)."""
    percent = DISCOUNTS.get(code, 0)
    return percent_of(subtotal(lines), percent)


def total(lines, code=None):
    return subtotal(lines) - discount(lines, code)


def receipt(lines, code=None):
    rows = [f"Subtotal: {format_cents(subtotal(lines))}"]
    if discount(lines, code):
        rows.append(f"Discount ({code}): -{format_cents(discount(lines, code))}")
    rows.append(f"Total: {format_cents(total(lines, code))}")
    return "\n".join(rows)
