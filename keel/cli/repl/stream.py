"""A streamed answer on a terminal: each line printed into the scrollback once.

A live region taller than the screen cannot be redrawn in place: the lines that scrolled off stay
behind, and the answer ends up in the scrollback more than once (120 lines became 212). So an
answer is printed as it settles: whole Markdown blocks (up to a blank line outside a code fence)
go into the scrollback for good, rendered as part of the whole answer so far, and only the block
still being written is live — cut to its last lines, so the live region always fits the screen.
"""

from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.segment import Segment

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def settled(text: str) -> int:
    """Where the answer's complete blocks end: just past the last blank line outside a code fence
    (0 when no block is complete yet)."""
    pos = end = 0
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break   # still being written
        pos += len(line)
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not line.strip()[len(m.group(1)):].strip():
            fence = None
        elif fence is None and not line.strip():
            end = pos
    return end


class Lines:
    """Rendered lines as a renderable (printed as they are, styles kept)."""

    def __init__(self, lines: list[list[Segment]]) -> None:
        self.lines = lines

    def __rich_console__(self, _console: Console, _options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield from line
            yield Segment.line()


class Tail:
    """The last ``height`` lines of a renderable: what fits the screen of a block still growing."""

    def __init__(self, renderable: RenderableType, height: int) -> None:
        self.renderable, self.height = renderable, max(height, 1)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options.update(height=None), pad=False)
        yield from Lines(lines[-self.height:]).__rich_console__(console, options)


class AnswerStream:
    """One model call's answer: ``feed`` returns the lines that settled (to print for good) and
    ``live`` what is still being written; ``finish`` returns the rest."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.text = ""
        self.printed = 0      # lines of the whole answer's rendering already in the scrollback
        self.upto = 0         # characters of the answer those lines render

    def _new_lines(self, upto: int) -> Lines | None:
        if not self.text[:upto].strip():
            return None
        lines = self.console.render_lines(Markdown(self.text[:upto]), self.console.options, pad=False)
        new, self.printed, self.upto = lines[self.printed:], len(lines), upto
        return Lines(new) if new else None

    def feed(self, text: str) -> Lines | None:
        self.text += text
        upto = settled(self.text)
        return self._new_lines(upto) if upto > self.upto else None

    def live(self, room: int) -> Tail:
        return Tail(Markdown(self.text[self.upto:]), room)

    def finish(self) -> Lines | None:
        return self._new_lines(len(self.text)) if len(self.text) > self.upto else None
