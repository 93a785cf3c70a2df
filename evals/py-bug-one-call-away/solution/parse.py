"""Reading the shop's CSV sales export: a header line, then date,region,amount_cents rows."""


def read_rows(text):
    """The data rows of an export, header skipped, each as a list of fields."""
    # Whether the export ends with a newline (or uses CRLF) depends on where it was saved.
    return [line.split(",") for line in text.splitlines()[1:] if line.strip()]


def amount(row):
    """The amount of a row, in cents."""
    return int(row[2])
