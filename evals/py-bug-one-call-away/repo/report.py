"""The monthly sales report."""

from parse import amount, read_rows


def by_region(text):
    totals = {}
    for row in read_rows(text):
        totals[row[1]] = totals.get(row[1], 0) + amount(row)
    return totals


def summary(text):
    """One line per region, A-Z, then the total; amounts in the currency unit, two decimals."""
    regions = by_region(text)
    lines = [f"{region}: {cents / 100:.2f}" for region, cents in sorted(regions.items())]
    lines.append(f"Total: {sum(regions.values()) / 100:.2f}")
    return "\n".join(lines)
