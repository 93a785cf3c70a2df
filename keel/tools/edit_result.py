"""What an edit matcher returns: the requests, the replacements found, and the result or refusal.

Plain data shared by keel.tools.edit_match (the tiers) and keel.tools.edit_variants (the second chances).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_LISTED = 50


@dataclass(frozen=True)
class EditRequest:
    old_text: str
    new_text: str
    replace_all: bool = False


@dataclass(frozen=True)
class Replacement:
    """Put ``text`` in place of ``content[start:end]``; lines are 1-based, in the original content."""

    start: int
    end: int
    text: str
    first_line: int
    last_line: int


@dataclass(frozen=True)
class MatchResult:
    replacements: tuple[Replacement, ...] = ()
    tier: str = ""                      # exact | line_endings | reindent | whitespace | quotes | elision
    notes: tuple[str, ...] = ()
    error: str = ""
    candidates: tuple[int, ...] = ()    # ambiguous: 1-based first line of every match
    closest: tuple[int, int] | None = None   # not found: 1-based inclusive region most like old_text
    already_applied_at: int | None = None    # not found, but new_text is present at this line
    tiers: tuple[str, ...] = field(default=())   # multi-edit: the tier of each edit

    @property
    def ok(self) -> bool:
        return not self.error


def lines_word(lines: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:MAX_LISTED])
    more = f" and {len(lines) - MAX_LISTED} more" if len(lines) > MAX_LISTED else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more}"
