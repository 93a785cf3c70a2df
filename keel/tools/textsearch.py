"""The in-process grep: what the grep tool runs when ripgrep is not there.

It must give exactly what ``rg`` gives on the same tree (tests compare them): the same
ignore rules (keel.context.ignore), files with a NUL byte skipped as binary, one hit per
matching line, bytes that are not UTF-8 never matched. The whole file is searched with one
compiled regex (per-line matching is several times slower); lines are found from the match
offsets.
"""

from __future__ import annotations

import importlib
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from keel.context.ignore import (
    FILE_TYPES,
    UTF16_BOMS,
    GlobMatcher,
    IgnoreRules,
    decode_like_rg,
    expand_braces,
    fnmatch_any,
    read_unless_binary,
)
from keel.policy.beneath import read_beneath, stat_beneath
from keel.policy.listing import Entry


class GrepError(Exception):
    """The search itself failed (bad regex, unknown type, timeout): the message names why."""


@dataclass(frozen=True)
class GrepQuery:
    pattern: str
    fixed_strings: bool = False
    case_insensitive: bool = False
    glob: str | None = None
    file_type: str | None = None
    context: int = 0


class FileHits:
    """The hits in one file: ``matches`` counted up front, the lines parsed only when shown.

    For rg the lines stay where they are in rg's output (``buf[start:end]``) until shown:
    copying tens of MB of matches only to count them would cost more than the search.
    """

    __slots__ = ("_buf", "_end", "_lines", "_start", "matches", "path")

    def __init__(self, path: str, matches: int, *, buf: bytes = b"", start: int = 0, end: int = 0,
                 lines: list[tuple[int, bool, str]] | None = None):
        self.path, self.matches, self._lines = path, matches, lines
        self._buf, self._start, self._end = buf, start, end

    def lines(self) -> list[tuple[int, bool, str]]:
        """(line number, is a match (not context), text) in line order."""
        if self._lines is None:
            found = (_RG_LINE.match(raw) for raw in self._buf[self._start:self._end].split(b"\n"))
            self._lines = [(int(m[1]), m[2] == b":", m[3].decode("utf-8", "replace")) for m in found if m]
        return self._lines


# rg prints "12:text" for a matching line and "12-text" for a context line.
_RG_LINE = re.compile(rb"(\d+)([:-])(.*)", re.DOTALL)


def sort_key(hit: FileHits) -> str:
    """Path order, directory by directory: 'a/z' sorts before 'a-b' ('\\0' is below every character)."""
    return hit.path.replace("/", "\0")


def compile_query(query: GrepQuery) -> re.Pattern[str]:
    if "\n" in query.pattern:
        raise GrepError("the pattern contains a newline; grep matches one line at a time")
    source = re.escape(query.pattern) if query.fixed_strings else query.pattern
    try:
        return re.compile(source, re.MULTILINE | (re.IGNORECASE if query.case_insensitive else 0))
    except re.error as exc:
        raise GrepError(f"invalid regex {query.pattern!r}: {exc}") from None


# A byte that is not UTF-8, as surrogateescape decodes it.
_RAW_BYTE = re.compile("[\udc80-\udcff]")


def _shown(line: str) -> str:
    """A line for display: undecodable bytes become U+FFFD, as when rg's output is decoded."""
    if _RAW_BYTE.search(line) is None:
        return line
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _matches_outside_raw_bytes(regex: re.Pattern[str], line: str) -> bool:
    """rg never matches a byte that is not UTF-8 (not even with '.' or '[^a]'), so a line
    holding such bytes counts only if some match avoids them."""
    if _RAW_BYTE.search(line) is None:
        return True
    pos = 0
    while pos <= len(line):
        m = regex.search(line, pos)
        if m is None:
            return False
        if _RAW_BYTE.search(m.group()) is None:
            return True
        pos = m.start() + 1
    return False


def search_text(regex: re.Pattern[str], text: str, raw_bytes: bool = False) -> list[tuple[int, str]]:
    """(line number, line) for each line with a match: one regex scan over the whole text.

    A match that runs across a newline (``\\s``, ``[^x]`` ...) proves nothing about a single
    line, so that line is checked on its own, as rg's line-by-line search would.
    """
    found: list[tuple[int, str]] = []
    end = len(text) if text.endswith("\n") else len(text) + 1
    pos, line_no, counted = 0, 1, 0
    while pos < end:
        m = regex.search(text, pos)
        if m is None or m.start() >= end:
            break
        start = text.rfind("\n", 0, m.start()) + 1
        stop = text.find("\n", m.start())
        stop = len(text) if stop == -1 else stop
        line = text[start:stop]
        crossed = m.end() > stop and regex.search(line) is None
        if not crossed and (not raw_bytes or _matches_outside_raw_bytes(regex, line)):
            line_no += text.count("\n", counted, start)
            counted = start
            found.append((line_no, line))
        pos = stop + 1
    return found


def _longest_literal_run(items: Any, parser: Any) -> str:
    """The longest run of plain characters in a regex sequence (only its top level, which
    every match passes through)."""
    runs, run = [], []
    for op, arg in items:
        if op is parser.LITERAL:
            run.append(chr(arg))
        else:
            runs.append("".join(run))
            run = []
    return max([*runs, "".join(run)], key=len)


def _required_literals(query: GrepQuery) -> tuple[list[str], bool] | None:
    """Texts of which every match contains at least one, and whether case is ignored; None if
    unsure. Reads CPython's own regex parser (private, so any surprise means no prefilter)."""
    if query.fixed_strings:
        return [query.pattern], query.case_insensitive
    try:
        parser = importlib.import_module("re._parser")
        parsed = parser.parse(query.pattern, re.IGNORECASE if query.case_insensitive else 0)
        items = list(parsed)
        if len(items) == 1 and items[0][0] is parser.BRANCH:  # a|b|c: one literal per branch
            options = [_longest_literal_run(branch, parser) for branch in items[0][1][1]]
        else:
            options = [_longest_literal_run(items, parser)]
        ignore_case = bool(parsed.state.flags & re.IGNORECASE)
        return (options, ignore_case) if all(len(o) >= 2 for o in options) else None
    except Exception:
        return None


def _prefilter(query: GrepQuery) -> Callable[[bytes], bool] | None:
    """A cheap bytes test that is False only for files that cannot match (None: no test)."""
    required = _required_literals(query)
    if required is None:
        return None
    options, ignore_case = required
    needles = [o.encode("utf-8", "surrogateescape") for o in options]
    if not ignore_case:
        return lambda data: any(needle in data for needle in needles)
    if not all(needle.isascii() for needle in needles):
        return None
    lowered = [needle.lower() for needle in needles]

    def may_match(data: bytes) -> bool:
        # Folding bytes is exact only for ASCII text (Unicode case rules map e.g. U+212A to 'k').
        if not data.isascii():
            return True
        folded = data.lower()
        return any(needle in folded for needle in lowered)

    return may_match


def _with_context(found: list[tuple[int, str]], text: str, context: int, raw_bytes: bool
                  ) -> list[tuple[int, bool, str]]:
    show = _shown if raw_bytes else str
    if not context or not found:
        return [(n, True, show(line)) for n, line in found]
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    matched = {n for n, _ in found}
    wanted = sorted({k for n in matched for k in range(max(1, n - context), min(len(lines), n + context) + 1)})
    return [(k, k in matched, show(lines[k - 1])) for k in wanted]


def grep_python(root: str, target: str, query: GrepQuery, rules: IgnoreRules) -> list[FileHits]:
    """The same search as ``grep_rg`` without ripgrep; ``target`` is relative to ``root``."""
    regex = compile_query(query)
    may_match = _prefilter(query)
    type_globs: tuple[str, ...] = ()
    if query.file_type:
        if query.file_type not in FILE_TYPES:
            raise GrepError(f"unrecognized file type: {query.file_type} (known: {', '.join(sorted(FILE_TYPES))})")
        type_globs = FILE_TYPES[query.file_type]
    glob = query.glob or ""
    user_globs = GlobMatcher(expand_braces(glob.removeprefix("!"))) if glob else None
    whitelist = not glob.startswith("!")  # rg: a plain glob selects files, a '!glob' excludes them

    def decide(entry: Entry, is_dir: bool) -> bool | None:
        # rg's order: the glob override decides first, then .gitignore, then the type filter.
        if user_globs is not None:
            hit = user_globs.match(entry.path[len(root) + 1:], is_dir)
            if hit is not None:
                return hit == whitelist
            if whitelist and not is_dir:
                return False
        if type_globs and not is_dir and not fnmatch_any(entry.name, type_globs):
            return False
        return None

    start = os.path.join(root, target) if target != "." else root
    paths: Iterable[str] = [start] if os.path.isfile(start) else (e.path for e in rules.walk_files(start, decide))
    hits = []
    for path in paths:
        data = read_unless_binary(path)
        if data is None or (may_match is not None and data[:2] not in UTF16_BOMS and not may_match(data)):
            continue
        decoded = decode_like_rg(data)
        if decoded is None or not decoded[0]:
            continue
        text, raw_bytes = decoded
        found = search_text(regex, text, raw_bytes)
        if found:
            hits.append(FileHits(path[len(root) + 1:], len(found), lines=_with_context(found, text, query.context, raw_bytes)))
    hits.sort(key=sort_key)
    return hits


def confirm_hits(root: str, hits: list[FileHits], shown: int) -> list[FileHits]:
    """The hits of a ripgrep search that keel confirms itself: rg opens files by path, so a directory
    swapped for a symlink while it searched would have been followed out of the workspace. The files
    whose lines may be shown (until ``shown`` matches are covered) are read again below ``root`` with
    no link followed (keel.policy.beneath) and kept only when every line rg printed is the file's line
    at that number; the rest must still be regular files reached without a link."""
    kept: list[FileHits] = []
    for hit in hits:
        if shown > 0:
            ok = _same_lines(root, hit)
            shown -= hit.matches
        else:
            ok = _still_regular(root, hit.path)
        if ok:
            kept.append(hit)
    return kept


def _same_lines(root: str, hit: FileHits) -> bool:
    try:
        data = read_beneath(root, hit.path)
    except OSError:
        return False
    decoded = decode_like_rg(data)
    if decoded is None:
        return False
    lines = decoded[0].split("\n")
    show = _shown if decoded[1] else str
    return all(n - 1 < len(lines) and show(lines[n - 1]) == text for n, _, text in hit.lines())


def _still_regular(root: str, rel: str) -> bool:
    try:
        return stat.S_ISREG(stat_beneath(root, rel).st_mode)
    except OSError:
        return False
