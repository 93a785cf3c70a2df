"""Word frequencies for wordtop."""

import re
from collections import Counter

WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def top_words(text, n=3, min_length=1):
    """The n most common words of text, lower-cased, as (word, count): most common first, ties A-Z.
    Words shorter than min_length letters are not counted."""
    counts = Counter(w for w in WORD.findall(text.lower()) if len(w) >= min_length)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
