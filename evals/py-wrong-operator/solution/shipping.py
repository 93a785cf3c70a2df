"""Shipping charges for the checkout page. Amounts are integer cents."""

FLAT_RATE_CENTS = 499
FREE_SHIPPING_CENTS = 5000


def shipping_cost(subtotal_cents, threshold_cents=FREE_SHIPPING_CENTS):
    """Orders of ``threshold_cents`` or more ship free; smaller orders pay the flat rate."""
    if subtotal_cents >= threshold_cents:
        return 0
    return FLAT_RATE_CENTS
