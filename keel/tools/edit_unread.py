"""Read-before-edit: an edit_file whose old_text was not found, on a file this session never read.

A small model edits files it never read, with an ``old_text`` it invented. Refusing is not
enough: the next attempt invents again. So the refusal carries the file's relevant region,
numbered exactly as read_file numbers it, and the next attempt can copy real text. Pure: text
in, text out.
"""

from __future__ import annotations

WHOLE_FILE_LINES = 80    # a file this short is shown whole
REGION_MARGIN = 12       # lines around the closest region of a longer file
HEAD_LINES = 60          # a longer file with no similar region: its start


def _numbered(lines: list[str], first: int, last: int) -> str:
    return "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(first, last + 1))


def unread_region(text: str, closest: tuple[int, int] | None) -> tuple[str, bool]:
    """The part of the file to show with the refusal, and whether that is the whole file."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    total = len(lines)
    if total == 0:
        return "(the file is empty)", True
    if total <= WHOLE_FILE_LINES:
        return _numbered(lines, 1, total), True
    if closest is not None:
        first, last = max(1, closest[0] - REGION_MARGIN), min(total, closest[1] + REGION_MARGIN)
    else:
        first, last = 1, HEAD_LINES
    shown = _numbered(lines, first, last)
    return f"{shown}\n(lines {first}-{last} of {total}; read_file shows the rest)", False


def unread_note(rel: str, text: str, closest: tuple[int, int] | None) -> tuple[str, bool]:
    """The paragraph added to the refusal, and whether the model has now seen the whole file."""
    region, whole = unread_region(text, closest)
    what = "its full text" if whole else "the relevant part"
    return (f"You had not read {rel} in this session, so old_text was a guess. Here is {what} "
            f"(line number, tab, line); copy old_text from these lines, without the numbers:\n{region}"), whole
