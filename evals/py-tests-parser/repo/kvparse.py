"""A parser for simple ``key = value`` configuration files."""


class ParseError(ValueError):
    def __init__(self, lineno, message):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def parse(text):
    """Parse ``key = value`` lines into a dict of strings.

    - Blank lines and lines whose first non-blank character is ``#`` are skipped.
    - Keys are stripped and lower-cased; an empty key is an error.
    - Values are stripped. The first ``=`` separates key and value; later ones belong to the value.
    - An unquoted value ends at an inline comment: `` #`` (a space, then ``#``) and what follows are dropped.
    - A value in double quotes keeps its inner text exactly, including spaces and ``#``.
    - When a key appears twice, the last value wins.
    - A line without ``=`` raises ParseError whose ``lineno`` is the 1-based line number.
    """
    result = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ParseError(lineno, f"expected key = value, got {raw!r}")
        key = key.strip().lower()
        if not key:
            raise ParseError(lineno, "empty key")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].rstrip()
        result[key] = value
    return result
