"""Where a search-and-replace edit goes, as pure functions on strings (the file's LF view).

The matcher tries tiers from strict to lenient: exact, line endings, uniform re-indentation,
whitespace, quotes, ``...`` elision. A tier must find exactly one place; several places are
refused at that tier with every candidate listed, never guessed. Every tier past the exact ones
also requires uniqueness under the most lenient comparison, so drift can never make a second,
similar block look unique. Zero matches come back with the closest region and what differs.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property

from keel.tools.edit_lines import LINE_TIERS, diagnose_not_found, lenient
from keel.tools.edit_result import EditRequest, MatchResult, Replacement
from keel.tools.edit_result import lines_word as _lines_word
from keel.tools.edit_variants import blank_line_match, numbered_match, plain_spaces

_ELISION = re.compile(r"^\s*(?:\.\.\.|(?:#|//)\s*\.\.\..*)\s*$")
LINE_HINT_SLACK = 5


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _split(text: str) -> list[str]:
    return (text[:-1] if text.endswith("\n") else text).split("\n")


class _Doc:
    """The content split into lines, with offsets and lazily built lookup keys."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.lines = _split(content) if content else []
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line) + 1

    def line_of(self, offset: int) -> int:
        return max(1, bisect_right(self.starts, offset))

    def span(self, i: int, k: int) -> tuple[int, int]:
        """Offsets of lines i..i+k-1 (0-based), without the last line's newline."""
        return self.starts[i], self.starts[i + k - 1] + len(self.lines[i + k - 1])

    @cached_property
    def lenient_keys(self) -> list[str]:
        return [lenient(line) for line in self.lines]

    @cached_property
    def lenient_index(self) -> dict[str, list[int]]:
        return _index(self.lenient_keys)


def _index(keys: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


def _windows(doc: _Doc, old: list[str]) -> list[int]:
    """Every line where old_text fits under the most lenient comparison."""
    okeys = [lenient(line) for line in old]
    anchor = next((j for j, key in enumerate(okeys) if key), None)
    if anchor is None:
        return []
    k = len(old)
    starts = (c - anchor for c in doc.lenient_index.get(okeys[anchor], ()))
    return [i for i in starts if i >= 0 and i + k <= len(doc.lines) and doc.lenient_keys[i:i + k] == okeys]


def _line_match(doc: _Doc, old: list[str], new: list[str], replace_all: bool) -> MatchResult | None:
    windows = _windows(doc, old)
    if not windows:
        return None
    k = len(old)
    for tier, fit in LINE_TIERS:
        fits = [(i, r) for i in windows if (r := fit(doc.lines[i:i + k], old, new)) is not None]
        if not fits:
            continue
        # Exact lines are judged like an exact substring; anything looser must be unique even
        # under the loosest comparison, so a drifted copy elsewhere cannot be mistaken for it.
        rivals = [i for i, _ in fits] if tier == "exact" else windows
        if len(rivals) > 1 and not replace_all:
            return _ambiguous([i + 1 for i in rivals], tier)
        chosen, last_end = [], -1
        for i, lines in fits:
            if i > last_end:
                chosen.append(_line_replacement(doc, i, k, lines))
                last_end = i + k - 1
        return MatchResult(replacements=tuple(chosen), tier=tier)
    i = windows[0]
    return MatchResult(error=(f"old_text matches {_lines_word([w + 1 for w in windows])} once whitespace is "
                              "ignored, but its indentation is not a uniform shift of the file's, so where "
                              "new_text's lines belong is unclear. Copy old_text's indentation from the file."),
                       closest=(i + 1, i + k), candidates=tuple(w + 1 for w in windows))


def _line_replacement(doc: _Doc, i: int, k: int, lines: list[str]) -> Replacement:
    start, end = doc.span(i, k)
    if not lines:  # deletion: take the line break too, so no empty line is left behind
        if end < len(doc.content):
            end += 1
        elif start > 0:
            start -= 1
    return Replacement(start, end, "\n".join(lines), i + 1, i + k)


def _ambiguous(lines: list[int], tier: str) -> MatchResult:
    how = "exactly" if tier in ("exact", "line_endings") else "once whitespace and quotes are ignored"
    shown = sorted(set(lines))
    return MatchResult(error=(f"old_text matches {len(lines)} places {how}: {_lines_word(shown)}. Nothing was "
                              "changed. Add neighbouring lines to old_text so it matches one place only, "
                              "or set replace_all=true to change every place."),
                       candidates=tuple(shown), tier=tier)


# ---- substring tiers ------------------------------------------------------------------------------

def _hits(content: str, old: str, overlapping: bool) -> list[int]:
    out, pos = [], content.find(old)
    while pos != -1:
        out.append(pos)
        pos = content.find(old, pos + (1 if overlapping else len(old)))
    return out


def _substring_match(doc: _Doc, old: str, new: str, tier: str, replace_all: bool) -> MatchResult | None:
    hits = _hits(doc.content, old, overlapping=not replace_all)
    if not hits:
        return None
    if len(hits) > 1 and not replace_all:
        return _ambiguous([doc.line_of(h) for h in hits], tier)
    if not replace_all and (repeat := _would_repeat(doc.content, hits[0], old, new)):
        return repeat
    reps = []
    for h in hits:
        text, end = new, h + len(old)
        ends_line = end == len(doc.content) or doc.content[end] == "\n"
        if text and old.endswith("\n") and not text.endswith("\n"):
            text += "\n"    # the model dropped new_text's last newline; do not join two lines
        elif ends_line and text.endswith("\n") and not old.endswith("\n"):
            text = text[:-1]    # the file's own newline follows; do not add a blank line
        reps.append(Replacement(h, end, text, doc.line_of(h), doc.line_of(max(h, end - 1))))
    return MatchResult(replacements=tuple(reps), tier=tier)


def _would_repeat(content: str, at: int, old: str, new: str) -> MatchResult | None:
    """new_text = old_text plus an addition that already sits next to old_text: applying it again
    would duplicate the addition (the classic double-applied insert)."""
    end = at + len(old)
    added_after = new.startswith(old) and content.startswith(new, at)
    added_before = new.endswith(old) and len(new) <= end and content.startswith(new, end - len(new))
    addition = new[len(old):] if added_after else new[: len(new) - len(old)]
    if not (added_after or added_before) or not addition.strip():
        return None
    line = content.count("\n", 0, at if added_after else end - len(new)) + 1
    return MatchResult(error=(f"new_text is already in the file at line {line} (old_text plus the lines you add "
                              "are all there): this edit was probably applied already, and applying it again "
                              "would duplicate the addition. Nothing was changed. If you really want another "
                              "copy, include the neighbouring lines in old_text."), already_applied_at=line)


# ---- elision --------------------------------------------------------------------------------------

def _pieces(lines: list[str]) -> list[list[str]]:
    pieces: list[list[str]] = [[]]
    for line in lines:
        if _ELISION.match(line):
            pieces.append([])
        else:
            pieces[-1].append(line)
    return [_trim_blank(p) for p in pieces]


def _trim_blank(piece: list[str]) -> list[str]:
    lo, hi = 0, len(piece)
    while lo < hi and not piece[lo].strip():
        lo += 1
    while hi > lo and not piece[hi - 1].strip():
        hi -= 1
    return piece[lo:hi]


def _elision_match(doc: _Doc, old: list[str], new: list[str]) -> MatchResult | None:
    old_pieces, new_pieces = _pieces(old), _pieces(new)
    if len(old_pieces) == 1:
        return None
    if len(old_pieces) != len(new_pieces):
        return MatchResult(error=(f"old_text has {len(old_pieces) - 1} '...' line(s) but new_text has "
                                  f"{len(new_pieces) - 1}; new_text must keep the same '...' lines so the "
                                  "elided parts stay as they are."))
    parts: list[Replacement] = []
    for n, (op, np_) in enumerate(zip(old_pieces, new_pieces, strict=True), 1):
        if not op:
            if np_:
                return MatchResult(error=(f"part {n} of new_text (between '...' lines) adds text where old_text "
                                          "has nothing to anchor it. Put real lines from the file there."))
            continue
        res = _line_match(doc, op, np_, replace_all=False)
        if res is None:
            return MatchResult(error=f"part {n} of old_text (split at its '...' lines) is not in the file.")
        if not res.ok:
            return replace(res, error=f"part {n} of old_text (split at its '...' lines): {res.error}")
        parts.append(res.replacements[0])
    if not parts:
        return MatchResult(error="old_text holds only '...' lines; copy the lines to change from the file.")
    for a, b in zip(parts, parts[1:], strict=False):
        if b.start < a.end:
            return MatchResult(error=(f"the parts of old_text between '...' lines are found out of order (line "
                                      f"{a.first_line} then line {b.first_line}); they must follow the file."))
    pieces, cursor = [], parts[0].start
    for p in parts:
        pieces += [doc.content[cursor:p.start], p.text]
        cursor = p.end
    return MatchResult(replacements=(Replacement(parts[0].start, parts[-1].end, "".join(pieces),
                                                 parts[0].first_line, parts[-1].last_line),), tier="elision")


# ---- not found --------------------------------------------------------------------------------------

def _already_applied(doc: _Doc, new: str) -> int | None:
    if not new.strip():
        return None
    pos = doc.content.find(new)
    if pos != -1:
        return doc.line_of(pos)
    windows = _windows(doc, _trim_blank(_split(new)))
    return windows[0] + 1 if windows else None


def _not_found(doc: _Doc, old: list[str], new: str, had_cr: bool) -> MatchResult:
    d = diagnose_not_found(doc.lines, old, already_applied_at=_already_applied(doc, new), had_cr=had_cr)
    return MatchResult(error=d.message, closest=d.closest, already_applied_at=d.already_applied_at)


# ---- public entry points ----------------------------------------------------------------------------

def find_edit(content: str, old_text: str, new_text: str, *, replace_all: bool = False,
              line_hint: int | None = None) -> MatchResult:
    """Locate one edit in ``content`` (LF line endings) and say what replaces what, or why not."""
    if not old_text:
        return MatchResult(error="old_text is empty: copy the lines to replace from the file "
                                 "(to create a file, use write_file).")
    if old_text == new_text:
        return MatchResult(error="old_text and new_text are identical, so nothing would change.")
    doc, new = _Doc(content), _lf(new_text)
    old = _lf(old_text)
    result = _substring_match(doc, old_text, new, "exact", replace_all)
    if result is None and old != old_text:
        result = _substring_match(doc, old, new, "line_endings", replace_all)
    if result is None and old.strip():
        old_lines, new_lines = _split(old), _split(new) if new else []
        spaced = plain_spaces(old_lines, new_lines, content)
        old_lines, new_lines = spaced or (old_lines, new_lines)
        result = _line_match(doc, old_lines, new_lines, replace_all)
        trimmed = _trim_blank(old_lines)
        if result is None and len(trimmed) < len(old_lines):   # blank lines the model added at the edges
            result = _line_match(doc, trimmed, _trim_blank(new_lines) if new_lines else [], replace_all)
        if result is None and not replace_all:
            result = (blank_line_match(old_lines, new_lines, lambda o, n: _line_match(doc, o, n, False))
                      or _elision_match(doc, old_lines, new_lines) or numbered_match(content, old, new, find_edit))
        if spaced and result is not None and result.ok:
            result = replace(result, tier="unicode_spaces" if result.tier == "exact" else result.tier,
                             notes=(*result.notes, "old_text's no-break/odd Unicode spaces were read as plain spaces."))
        if result is None or not (result.ok or result.candidates):
            missing = _not_found(doc, old_lines, new, old != old_text)
            # '...' lines may be real file text; the region is worth more than the elision complaint
            why = f"\n(Reading the '...' lines as elision did not work either: {result.error})" if result else ""
            result = replace(missing, error=missing.error + why)
    if result is None:
        return MatchResult(error="old_text is only whitespace and is not in the file; include real lines.")
    return _with_line_hint(result, line_hint)


def _with_line_hint(result: MatchResult, line_hint: int | None) -> MatchResult:
    if line_hint is None:
        return result
    if result.candidates and not result.ok:
        return replace(result, error=result.error + f" (line_hint={line_hint} does not choose between them.)")
    if len(result.replacements) == 1:
        at = result.replacements[0].first_line
        if abs(at - line_hint) > LINE_HINT_SLACK:
            return replace(result, notes=(*result.notes, f"line_hint was {line_hint} but old_text matched "
                                          f"line {at}, the only match; the edit was made there."))
    return result


def find_edits(content: str, requests: Sequence[EditRequest], *, line_hint: int | None = None) -> MatchResult:
    """Locate several edits against the same original content; all of them or none."""
    reps: list[tuple[Replacement, int]] = []
    tiers: list[str] = []
    notes: list[str] = []
    for n, req in enumerate(requests, 1):
        hint = line_hint if len(requests) == 1 else None
        res = find_edit(content, req.old_text, req.new_text, replace_all=req.replace_all, line_hint=hint)
        if not res.ok and len(requests) == 1:
            return res
        if not res.ok:
            later = ""
            if n > 1 and find_edit(apply_replacements(content, [r for r, _ in reps]), req.old_text, req.new_text).ok:
                later = (" Its old_text only exists after the earlier edits are applied, but all edits are "
                         "matched against the file as it is now: merge it into the earlier edit.")
            return replace(res, error=(f"edit {n} of {len(requests)} failed: {res.error}{later}\nNO edit was "
                                       f"applied; the file is unchanged. Fix edit {n} and send all edits again."))
        reps += [(r, n) for r in res.replacements]
        tiers.append(res.tier)
        notes += res.notes
    reps.sort(key=lambda rn: rn[0].start)
    for (a, na), (b, nb) in zip(reps, reps[1:], strict=False):
        if b.start < a.end:
            return MatchResult(error=(f"edits {min(na, nb)} and {max(na, nb)} overlap (around line {b.first_line})"
                                      "; NO edit was applied. Combine them into one edit."))
    return MatchResult(replacements=tuple(r for r, _ in reps), tier=",".join(dict.fromkeys(tiers)),
                       notes=tuple(notes), tiers=tuple(tiers))


def apply_replacements(content: str, replacements: Sequence[Replacement]) -> str:
    out, cursor = [], 0
    for r in sorted(replacements, key=lambda r: r.start):
        out += [content[cursor:r.start], r.text]
        cursor = r.end
    out.append(content[cursor:])
    return "".join(out)


def edited_ranges(content: str, replacements: Sequence[Replacement]) -> list[tuple[int, int]]:
    """1-based inclusive line ranges the replacements occupy in the content after applying them."""
    ranges, shift = [], 0
    for r in sorted(replacements, key=lambda r: r.start):
        first = content.count("\n", 0, r.start) + 1 + shift
        last = first + r.text.count("\n") - (1 if r.text.endswith("\n") else 0)
        ranges.append((first, max(first, last)))
        shift += r.text.count("\n") - content.count("\n", r.start, r.end)
    return ranges
