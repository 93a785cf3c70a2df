"""URL slugs."""

import re
import unicodedata


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
