"""Text utilities used across the site generator."""

import re
import textwrap
import unicodedata

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SMALL_WORDS = {"a", "an", "and", "as", "at", "but", "by", "for", "in", "of", "on", "or", "the", "to"}


# --- case conversion --------------------------------------------------------------------


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


# --- wrapping and indentation ------------------------------------------------------------


def wrap_text(text, width=72):
    """Paragraphs (separated by blank lines) re-wrapped to ``width`` columns."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in paragraphs)


def indent(text, prefix="    "):
    """``prefix`` before every non-blank line."""
    return "\n".join(prefix + line if line.strip() else line for line in text.split("\n"))


def dedent_block(text):
    """Common leading whitespace removed, and leading/trailing blank lines dropped."""
    return textwrap.dedent(text).strip("\n")


# --- slugs -------------------------------------------------------------------------------


def strip_accents(text):
    """"Crème brûlée" -> "Creme brulee"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def slugify(text, max_length=60):
    """URL slug: ASCII, lower case, words joined by "-", at most ``max_length`` characters."""
    ascii_text = strip_accents(text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-")


def unique_slug(text, taken):
    """slugify(text), with "-2", "-3", ... appended until it is not in ``taken``."""
    base = slugify(text)
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    return slug
