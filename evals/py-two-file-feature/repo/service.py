"""Word frequencies for wordtop."""

import re
from collections import Counter

WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def top_words(text, n=3):
    """The n most common words of text, lower-cased, as (word, count): most common first, ties A-Z."""
    counts = Counter(WORD.findall(text.lower()))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
