"""Common Log Format lines -> dicts."""

import re

LINE = re.compile(r'^(?P<ip>\S+) \S+ \S+ \[(?P<time>[^\]]+)\] "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" '
                  r'(?P<status>\d{3}) (?P<bytes>\d+|-)$')


def parse_line(line):
    """One request as a dict, or None for a line that is not in Common Log Format."""
    match = LINE.match(line.strip())
    if not match:
        return None
    entry = match.groupdict()
    entry["status"] = int(entry["status"])
    entry["bytes"] = 0 if entry["bytes"] == "-" else int(entry["bytes"])
    return entry


def parse_file(path):
    with open(path, encoding="utf-8") as fh:
        return [e for e in map(parse_line, fh) if e is not None]
