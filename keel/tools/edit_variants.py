"""Second chances for an old_text that drifted in ways the line tiers do not forgive, as pure
functions on line lists:

- **odd spaces**: a no-break, thin or ideographic space where the file has a plain one (models
  and chat front ends produce these). The odd spaces become plain ones in old_text *and* new_text
  before matching, so none is written into the file; only characters the file itself never uses
  are changed, so a file that really holds no-break spaces keeps them.
- **blank lines**: old_text with one blank line more or fewer than the file. Every variant with
  one blank line removed or added (at a place new_text shares with old_text, so the same line
  can be removed from or added to new_text) is matched by the caller's own matcher, with all its
  uniqueness rules; variants that land in different places are refused as ambiguous, never guessed.
- **line numbers**: old_text copied with read_file's numbers, accepted only at the line they name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from difflib import SequenceMatcher

from keel.tools.edit_result import MatchResult, lines_word

_NUMBERED = re.compile(r"^ *(\d+)\t")
# Unicode space separators (category Zs) other than the plain space.
ODD_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")

Attempt = Callable[[list[str], list[str]], "MatchResult | None"]
Find = Callable[[str, str, str], MatchResult]   # keel.tools.edit_match.find_edit, passed in


def plain_spaces(old: list[str], new: list[str], content: str) -> tuple[list[str], list[str]] | None:
    """old and new with the odd spaces of old_text made plain, or None when there is nothing to do.
    Odd spaces the file itself contains are left alone: there they may be meant."""
    odd = set(ODD_SPACES.findall("\n".join(old))) - set(ODD_SPACES.findall(content))
    if not odd:
        return None
    table = {ord(c): " " for c in odd}
    return [line.translate(table) for line in old], [line.translate(table) for line in new]


def blank_line_variants(old: list[str], new: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(old, new) with one inner blank line fewer, then with one more, at every place where
    old_text and new_text agree around it."""
    equal = [(i1, i2, j1) for tag, i1, i2, j1, _ in SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
             if tag == "equal"]
    for i in range(1, len(old) - 1):      # blank lines at the edges are trimmed by the matcher itself
        if old[i].strip():
            continue
        j = next((j1 + i - i1 for i1, i2, j1 in equal if i1 <= i < i2), None)
        if j is not None:
            yield old[:i] + old[i + 1:], new[:j] + new[j + 1:]
    for i in range(1, len(old)):
        # Inside or at the start of a stretch new_text shares with old_text, else where one ends: next
        # to the lines it sat between in the file, after any line the edit adds just before them.
        j = next((j1 + i - i1 for i1, i2, j1 in equal if i1 <= i < i2), None)
        if j is None:
            j = next((j1 + i2 - i1 for i1, i2, j1 in equal if i2 == i), None)
        if j is not None:
            yield old[:i] + [""] + old[i:], new[:j] + [""] + new[j:]


def blank_line_match(old: list[str], new: list[str], attempt: Attempt) -> MatchResult | None:
    """The one place old_text fits with a blank line more or fewer, or a refusal naming every place."""
    found: dict[tuple[tuple[int, int], ...], MatchResult] = {}
    for o, n in blank_line_variants(old, new):
        result = attempt(o, n)
        if result is None:
            continue
        if not result.ok:
            return result
        found.setdefault(tuple((r.start, r.end) for r in result.replacements), result)
    if not found:
        return None
    if len(found) > 1:
        lines = sorted({r.replacements[0].first_line for r in found.values()})
        return MatchResult(error=(f"old_text matches {lines_word(lines)} once one blank line is added or removed. "
                                  "Nothing was changed. Copy the lines, blank ones included, exactly from the file."),
                           candidates=tuple(lines), tier="blank_lines")
    only = next(iter(found.values()))
    return replace(only, tier="blank_lines")


# ---- read_file line numbers ----------------------------------------------------------------------

def split_lines(text: str) -> list[str]:
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def _unnumbered(text: str) -> tuple[str, int] | None:
    """text without read_file's ``{n:>6}\\t`` prefixes and its first line number, if every line has one."""
    found = [_NUMBERED.match(line) for line in split_lines(text)]
    matches = [m for m in found if m]
    if not text.strip() or len(matches) != len(found):
        return None
    return "".join(line[m.end():] + "\n" for line, m in zip(split_lines(text), matches, strict=True)), int(matches[0][1])


def numbered_match(content: str, old: str, new: str, find_edit: Find) -> MatchResult | None:
    """old_text copied with read_file's line numbers: strip them, and accept the match only at the very
    line the numbers name, so a stray prefix can never move the edit."""
    stripped = _unnumbered(old)
    if stripped is None:
        return None
    plain_new = _unnumbered(new)
    res = find_edit(content, stripped[0], plain_new[0] if plain_new else new)
    if not res.ok or res.replacements[0].first_line != stripped[1]:
        return None
    return replace(res, tier="line_numbers", notes=(*res.notes, "old_text carried read_file's line numbers; "
                                                    "they were removed. Send file text only."))
