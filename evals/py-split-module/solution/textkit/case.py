"""Case conversion for identifiers and headlines."""

import re

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SMALL_WORDS = {"a", "an", "and", "as", "at", "but", "by", "for", "in", "of", "on", "or", "the", "to"}


def camel_to_snake(name):
    """"parseHTTPResponse" -> "parse_http_response"."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def snake_to_camel(name, upper_first=False):
    """"parse_http_response" -> "parseHttpResponse" (or "ParseHttpResponse")."""
    head, *rest = name.split("_")
    head = head.capitalize() if upper_first else head.lower()
    return head + "".join(part.capitalize() for part in rest)


def title_case(text):
    """Headline style: small words stay lower case except at the start and end."""
    words = text.split()
    out = []
    for i, word in enumerate(words):
        small = word.lower() in _SMALL_WORDS and 0 < i < len(words) - 1
        out.append(word.lower() if small else word[:1].upper() + word[1:])
    return " ".join(out)
