"""Streaming answer text without the tool calls a model wrote as text.

A model whose server does not parse its calls writes them into the answer (``<tool_call>{…}``,
``<function=…>``, a fenced JSON call); keel recovers them after the reply ends (keel.engine.recovery)
and the terminal shows each as its step line. Streamed as it arrives, the raw call text would be
printed first, so the front ends hold text back from the first place a call could start until the
reply is complete: then it is dropped when calls were recovered from it, and printed when not.

Linear in the text: one regular-expression pass over literal markers, then a marker-long tail.
"""

from __future__ import annotations

import re

# Where a written call can begin. A fence is held too: a fenced JSON call is recovered anywhere.
MARKERS = ("<tool_call>", "<function=", '<function name="', "<function_call>", "<tools>", "<response>",
           "<json>", "```")
LINE_MARKER = "functions."   # llama-cpp-python's `functions.NAME:` line, only at a line's start
WINDOW = max(len(m) for m in (*MARKERS, LINE_MARKER))
# Literal alternatives only (no nested quantifiers): one linear pass, in C.
_BARE_FENCE = re.compile(r"```[\w-]*")
_WHOLE = re.compile("|".join(re.escape(m) for m in MARKERS) + r"|(?m:^)" + re.escape(LINE_MARKER))


def recovered_from_text(event: dict[str, object]) -> bool:
    """Whether a model_call event's calls were recovered from its text (not sent as structured calls)."""
    fmt = str(event.get("tool_call_format") or "")
    return bool(event.get("tool_calls")) and fmt not in ("", "structured")


class CallTextFilter:
    """Feed it the reply's content deltas; it returns what may be shown now. ``end`` settles the rest."""

    def __init__(self) -> None:
        self.pending = ""      # received, not shown: a possible call start and what follows it
        self.holding = False   # a call marker was seen: everything after it waits for the reply's end
        self.shown = ""        # shown so far in this reply
        self.visible = False   # something other than whitespace was shown

    def feed(self, text: str) -> str:
        self.pending += text
        if self.holding:
            return ""
        cut = self._safe_end()
        out, self.pending = self.pending[:cut], self.pending[cut:]
        self.shown += out
        self.visible = self.visible or bool(out.strip())
        return out

    def end(self, recovered: bool, content: str) -> str:
        """At the reply's end: the text still to show. ``recovered``: calls were taken from the text,
        whose shown form is ``content`` (the reply without the calls); only what it adds is shown."""
        held, shown = self.pending, self.shown
        self.reset()
        if not recovered:
            return held
        done, clean = shown.strip(), content.strip()
        if _BARE_FENCE.fullmatch(clean):   # the opening fence of a call the grammar ended without closing
            return ""
        return clean[len(done):] if clean.startswith(done) and len(clean) > len(done) else ""

    def reset(self) -> None:
        """The attempt was dropped (a retry): what it held is not the answer."""
        self.pending, self.holding, self.shown, self.visible = "", False, "", False

    def _safe_end(self) -> int:
        """How much of ``pending`` cannot be part of a call; sets ``holding`` at a whole marker."""
        text = self.pending
        if not self.visible:  # a reply that is nothing but a call object starts with "{"
            first = len(text) - len(text.lstrip())
            if text[first:first + 1] == "{":
                self.holding = True
                return first
        pos = 0
        while (m := _WHOLE.search(text, pos)) is not None:
            if m.start() == 0 and m.group() == LINE_MARKER and self.shown[-1:] not in ("", "\n"):
                pos = 1   # `functions.` that continues a shown line is prose
                continue
            self.holding = True
            return m.start()
        for i in range(max(len(text) - WINDOW + 1, 0), len(text)):  # the text may end inside a marker
            rest = text[i:]
            at_line_start = text[i - 1] == "\n" if i else self.shown[-1:] in ("", "\n")
            if any(m.startswith(rest) for m in MARKERS) or (at_line_start and LINE_MARKER.startswith(rest)):
                return i
        return len(text)
