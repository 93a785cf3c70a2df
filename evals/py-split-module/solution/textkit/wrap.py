"""Wrapping and indentation of paragraphs."""

import re
import textwrap


def wrap_text(text, width=72):
    """Paragraphs (separated by blank lines) re-wrapped to ``width`` columns."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in paragraphs)


def indent(text, prefix="    "):
    """``prefix`` before every non-blank line."""
    return "\n".join(prefix + line if line.strip() else line for line in text.split("\n"))


def dedent_block(text):
    """Common leading whitespace removed, and leading/trailing blank lines dropped."""
    return textwrap.dedent(text).strip("\n")
