"""Why an edit did not land, told so the model can fix it on the next turn.

The closest region of the file (found by lines that survive intact, then by character
similarity), its lines numbered like read_file, and each line that differs from old_text with its
whitespace made visible. Pure functions on lists of lines.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher, get_close_matches

CURLY_TO_STRAIGHT = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})
_WS_RUN = re.compile(r"\s+")
_VISIBLE = str.maketrans({" ": "·", "\t": "→", "\r": "␍"})
HINT_MIN_RATIO = 0.5
MAX_VOTERS = 50        # a line found more often than this (blank, "}", "return") does not vote
MAX_SHOWN_LINES = 40
MAX_SHOWN_DIFFS = 12


@dataclass(frozen=True)
class Diagnosis:
    message: str
    closest: tuple[int, int] | None       # 1-based inclusive lines most like old_text
    already_applied_at: int | None


def visible(text: str) -> str:
    return text.translate(_VISIBLE)


def strong_key(line: str) -> str:
    """A line with all whitespace removed and quotes straightened: what survives any drift."""
    return _WS_RUN.sub("", line).translate(CURLY_TO_STRAIGHT)


def diagnose_not_found(lines: list[str], old: list[str], *, already_applied_at: int | None,
                       had_cr: bool) -> Diagnosis:
    msg = ["old_text was not found in the file (tried exact, line endings, re-indentation, whitespace, quotes"
           " and '...' elision). Nothing was changed."]
    if already_applied_at is not None:
        msg.append(f"new_text is already in the file at line {already_applied_at}: this edit was probably "
                   "applied already. Re-read the file before editing it again.")
    region = closest_region(lines, old)
    closest = None
    if region:
        a, b, ratio = region
        closest = (a + 1, b)
        shown = "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(a, min(b, a + MAX_SHOWN_LINES)))
        msg.append(f"The closest region is lines {a + 1}-{b} ({ratio:.0%} similar):\n{shown}")
        diffs = differences(lines[a:b], a + 1, old)
        if diffs:
            msg.append("Where it differs from old_text (· space, → tab, ␍ CR):\n"
                       + "\n".join(diffs[:MAX_SHOWN_DIFFS]))
        msg.append("Copy old_text from the current file exactly (re-read it if it may have changed).")
    elif already_applied_at is None:
        msg.append("No similar region either: re-read the file; it may not contain what you expect.")
    if had_cr:
        msg.append("(old_text's CR/CRLF line endings were already ignored.)")
    return Diagnosis("\n".join(msg), closest, already_applied_at)


def closest_region(lines: list[str], old: list[str]) -> tuple[int, int, float] | None:
    """0-based half-open window of the file most like old_text, by line, ignoring whitespace."""
    okeys = [strong_key(line) for line in old]
    keys = [strong_key(line) for line in lines]
    index: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        index.setdefault(key, []).append(i)
    votes: Counter[int] = Counter()
    for j, key in enumerate(okeys):
        hits = index.get(key, []) if key else []
        for c in hits if len(hits) <= MAX_VOTERS else ():
            votes[c - j] += 1
    if not votes:  # no line survives intact: vote with near-identical lines instead
        distinct = [k for k in index if k]
        for j in sorted(range(len(okeys)), key=lambda j: -len(okeys[j]))[:5]:
            for near in get_close_matches(okeys[j], distinct, n=3, cutoff=0.6) if okeys[j] else ():
                for c in index[near][:MAX_VOTERS]:
                    votes[c - j] += 1
    k, wanted = len(old), "\n".join(okeys)
    scored = []
    for s in {s + d for s, _ in votes.most_common(8) for d in (-1, 0, 1)}:
        a, b = max(0, s), min(len(lines), s + k)   # a window as long as old_text
        if a < b:
            # Lines in the same position first (a changed line still leaves the rest aligned),
            # then character similarity, which also ranks single-line old_text.
            in_place = sum(keys[a + j] == okeys[j + a - s] for j in range(b - a))
            ratio = SequenceMatcher(None, wanted, "\n".join(keys[a:b]), autojunk=False).ratio()
            scored.append((in_place, ratio, -a, b))
    if not scored:
        return None
    _, ratio, neg_a, b = max(scored)
    best = (-neg_a, b, ratio)
    return best if best[2] >= HINT_MIN_RATIO else None


def differences(file_lines: list[str], first: int, old: list[str]) -> list[str]:
    out: list[str] = []
    sm = SequenceMatcher(None, [strong_key(x) for x in file_lines], [strong_key(x) for x in old], autojunk=False)
    for _tag, i1, i2, j1, j2 in sm.get_opcodes():
        for d in range(max(i2 - i1, j2 - j1)):
            f = file_lines[i1 + d] if i1 + d < i2 else None
            o = old[j1 + d] if j1 + d < j2 else None
            if f == o:
                continue
            label = f"line {first + i1 + d}"
            if f is not None and o is not None:
                out.append(f"  {label} file:     {visible(f)}\n  {' ' * len(label)} old_text: {visible(o)}")
            elif f is not None:
                out.append(f"  {label} file:     {visible(f)}   (missing from old_text)")
            else:
                out.append(f"  old_text line {j1 + d + 1}: {visible(o or '')}   (not in the file here)")
    return out
