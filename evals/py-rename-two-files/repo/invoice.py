"""Plain-text invoices."""

from orders import calc_total, line_total


def render_invoice(customer, lines, tax=True):
    rows = [f"Invoice for {customer}"]
    for quantity, unit_price in lines:
        rows.append(f"{quantity} x {unit_price / 100:.2f} = {line_total(quantity, unit_price) / 100:.2f}")
    rows.append(f"Total: {calc_total(lines, tax=tax) / 100:.2f}")
    return "\n".join(rows)
