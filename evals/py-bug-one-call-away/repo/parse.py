"""Reading the shop's CSV sales export: a header line, then date,region,amount_cents rows."""


def read_rows(text):
    """The data rows of an export, header skipped, each as a list of fields."""
    lines = text.split("\n")
    # The export ends with a newline, so the last element is the empty string after it.
    return [line.split(",") for line in lines[1:-1]]


def amount(row):
    """The amount of a row, in cents."""
    return int(row[2])
