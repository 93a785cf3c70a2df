"""Order arithmetic. Prices are integer cents."""

TAX_RATE_PERCENT = 8


def line_total(quantity, unit_price):
    return quantity * unit_price


def order_total(lines, tax=True):
    """Sum of (quantity, unit_price) lines, plus tax rounded half up to the cent."""
    subtotal = sum(line_total(q, p) for q, p in lines)
    if not tax:
        return subtotal
    return subtotal + (subtotal * TAX_RATE_PERCENT + 50) // 100
