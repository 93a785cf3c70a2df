"""The project overview: each file of the workspace with the definitions it holds, one line a file, in the
first message (the stable prefix every request of the session repeats).

Why: a model that does not know where code lives reads files one by one, or guesses (the 1.5B model
asked to rename a function never opened the module that defines it; asked about the INSTRUCTIONS.md of
an exercise it read instructions.md). One line a file — ``parse.py: def read_rows(text); def amount(row)``
— tells it where each name is for a few tokens. The signatures come from a parser (keel.context.outline);
a file keel may not read (a read rule, a secret) is named, never outlined, as in preloading.

Ranked as preloading ranks (keel.context.preload.rank_key: the files the task names first, then those
whose name or words it shares), then cut to a token budget: the lines that matter most survive a cut.
Byte-stable: the same workspace and task give the same text, computed once when the first message is
built, so the prefix cache keeps working (docs/context.md).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from keel.context.outline import Definition, outline
from keel.context.preload import CHARS_PER_TOKEN, FileText, rank_key
from keel.core.request import Request

HEADER = "Project overview (each file and what it defines):"
OTHERS = "Other files (use read_file to see one), and what each defines:"   # after the files shown whole
MAX_MEMBERS = 12   # methods shown per class
OVERVIEW_SHARE = 0.05   # of the window, at most ([context] overview_tokens is the other bound)
_MORE = "\n… and {} more files"


def file_line(f: FileText) -> str:
    """``path: sig; sig`` for a file keel can outline, else the path alone."""
    shape = outline(f.path, f.text) if f.text is not None else None
    if shape is None or not shape.definitions:
        return f.path
    return f"{f.path}: " + "; ".join(_definition(d) for d in shape.definitions)


def _definition(d: Definition) -> str:
    if not d.members:
        return d.signature
    names = [m.signature.removeprefix("def ").removeprefix("async def ") for m in d.members[:MAX_MEMBERS]]
    more = f", … {len(d.members) - MAX_MEMBERS} more" if len(d.members) > MAX_MEMBERS else ""
    return f"{d.signature} {{{', '.join(names)}{more}}}"


def render_overview(files: Sequence[FileText], request: Request, budget_tokens: int, *, skip: Collection[str] = (),
                    header: str = HEADER) -> str:
    """The overview of ``files`` (those in ``skip`` left out: shown whole elsewhere) for ``request``, within
    ``budget_tokens``; "" when there is nothing to show or no budget."""
    if budget_tokens <= 0:
        return ""
    ranked = sorted((f for f in files if f.path not in skip), key=lambda f: rank_key(f, request))
    left = int(budget_tokens * CHARS_PER_TOKEN) - len(header) - len(_MORE.format(len(ranked)))
    lines: list[str] = []
    for i, f in enumerate(ranked):
        line = file_line(f)
        if len(line) + 1 > left:
            line = f.path   # no room for its definitions: its name still says it exists
        if len(line) + 1 > left:
            lines.append(_MORE.format(len(ranked) - i).lstrip("\n"))
            break
        lines.append(line)
        left -= len(line) + 1
    return "\n".join([header, *lines]) if lines else ""
