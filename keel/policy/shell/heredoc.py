"""Here-document bodies, delimited the way bash delimits them.

bash ends a here-document at the first line equal to the delimiter after quote removal
(``<<E'O'F``, ``<<"EOF"``, ``<<\\EOF`` and ``<<E\\OF`` all end at ``EOF``), with leading tabs
stripped for ``<<-``. tree-sitter-bash has its own idea; if the two disagree, lines the judge
took for the body may be commands bash runs (``cat <<E'O'F`` ... ``EOF`` ... ``setsid -f sleep 1``).
Each here-document in the tree is checked against bash's rule and a disagreement is an "ask".
"""

from __future__ import annotations

from typing import Any

from keel.policy.shell.parse import Issue
from keel.policy.shell.words import REDIRECTS, WORDLIKE


def bash_delimiter(raw: str) -> str | None:
    """The delimiter bash compares lines with: the word after quote removal (None: not modelled)."""
    out: list[str] = []
    i = 0
    quote: str | None = None
    while i < len(raw):
        ch = raw[i]
        if quote == "'":
            if ch == "'":
                quote = None
            else:
                out.append(ch)
        elif quote == '"':
            if ch == '"':
                quote = None
            elif ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '$`"\\':
                out.append(raw[i + 1])
                i += 1
            else:
                out.append(ch)
        elif ch == "\\":
            if i + 1 < len(raw):
                out.append(raw[i + 1])
            i += 1
        elif ch == "$" and raw[i + 1:i + 2] in ("'", '"'):
            return None                   # $'..' / $".." in a delimiter: not modelled
        elif ch in "'\"":
            quote = ch
        else:
            out.append(ch)
        i += 1
    return None if quote is not None else "".join(out)


def _lines_agree(data: bytes, node: Any, delimiter: str, strip_tabs: bool) -> bool:
    """Does bash end this here-document exactly where tree-sitter does?"""
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    end = next((c for c in node.children if c.type == "heredoc_end"), None)
    if start is None or end is None:
        return False
    body_from = data.find(b"\n", start.end_byte)
    if body_from < 0 or body_from >= end.start_byte:
        return False
    line_start = data.rfind(b"\n", 0, end.start_byte) + 1
    line_end = data.find(b"\n", end.start_byte)
    end_line = data[line_start: len(data) if line_end < 0 else line_end].decode("utf-8", "surrogateescape")
    body = data[body_from + 1: line_start].decode("utf-8", "surrogateescape").split("\n")

    def ends(line: str) -> bool:
        return (line.lstrip("\t") if strip_tabs else line) == delimiter

    return ends(end_line) and not any(ends(line) for line in body[:-1])


def heredoc_disagreements(root: Any, data: bytes) -> list[Issue]:
    """An Issue for each here-document whose end tree-sitter places where bash would not."""
    issues: list[Issue] = []
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "heredoc_redirect":
            continue
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        raw = data[start.start_byte:start.end_byte].decode("utf-8", "surrogateescape") if start is not None else ""
        delimiter = bash_delimiter(raw)
        strip_tabs = any(c.type == "<<-" for c in node.children)
        if delimiter is None or not _lines_agree(data, node, delimiter, strip_tabs):
            issues.append(Issue("ask", f"the here-document <<{raw} may end elsewhere for bash than for the "
                                       "checker; lines after it could run unchecked", raw))
    return issues


def body_disagreements(root: Any, text: str, bodies: list[tuple[int, int]] | None) -> list[Issue]:
    """An Issue when tree-sitter's here-document bodies are not on the lines where bash reads them
    (``bodies``: character ranges from keel.policy.shell.reader, the delimiter line excluded):
    lines taken for a body could be commands."""
    if bodies is None:
        return []
    found: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "heredoc_redirect":
            body = next((c for c in node.children if c.type == "heredoc_body"), None)
            end = next((c for c in node.children if c.type == "heredoc_end"), None)
            if body is None or end is None:
                return [_misplaced(text)]
            found.append((body.start_point[0], end.start_point[0]))
        stack.extend(node.children)
    expected = [(text.count("\n", 0, start), text.count("\n", 0, end)) for start, end in bodies]
    return [] if sorted(found) == sorted(expected) else [_misplaced(text)]


def _misplaced(text: str) -> Issue:
    return Issue("ask", "here-document bodies are not where bash reads them; lines around them could run "
                        "unchecked", text[:80])


# -- where bash binds what follows a here-document ------------------------------------------------

def last_command(node: Any) -> Any:
    """The simple command a list or pipeline ends with (None: it ends with a group or a loop)."""
    while node is not None and node.type in ("list", "pipeline", "redirected_statement"):
        if node.type == "redirected_statement":
            node = node.child_by_field_name("body")
            continue
        elements = [c for c in node.named_children if c.type != "comment"]
        node = elements[-1] if elements else None
    return node if node is not None and node.type == "command" else None


def attached(heredoc: Any) -> list[Any]:
    """The redirects and words a here-document node holds before any ``&&``/``|``/``;``: the command's."""
    out = []
    for child in heredoc.children:
        if child.type in ("<<", "<<-", "heredoc_start", "comment"):
            continue
        if child.type not in REDIRECTS and child.type not in WORDLIKE:
            break
        out.append(child)
    return out
