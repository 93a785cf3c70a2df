"""The small-model tool set: five tools whose arguments are only the required ones.

A 1.5B model fills every field a schema offers: measured, it sent ``list_dir`` with
``max_entries: 2000000000000000`` (refused, a wasted turn), ``edit_file`` with ``line_hint: 0`` and
an ``edits`` list repeating the top-level edit, and grep with every option set to null. Each
optional field is a chance to be wrong and costs prompt tokens on every request (the cold
prompt is what takes minutes on a CPU). So the slim tools keep the full tools' names, behaviour
and annotations and change only the schema the model sees: each slim argument model maps onto
the full one, which runs unchanged (schema kept apart from its executor).

Which tools: the project's files are put in the first message (keel.context.preload), so
list_dir/find_files/grep are not needed to find the code of a small task; read_file stays for
files left out and to look again after an edit.
"""

from __future__ import annotations

import ast
import difflib
from typing import Any, ClassVar

from pydantic import BaseModel, Field, ValidationError, model_validator

from keel.policy.paths import PathJailError, resolve_in_workspace
from keel.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolSpec


class SlimArgs(ToolArgs):
    """Slim arguments are checked by the full model's rules too (edit_file's "old_text and new_text
    are identical"), so a breach is reported like any invalid argument, before anything runs."""

    full_args: ClassVar[type[BaseModel] | None] = None

    @model_validator(mode="after")
    def _valid_as_full(self) -> SlimArgs:
        if self.full_args is not None:
            try:
                self.full_args(**self.model_dump())
            except ValidationError as e:
                raise ValueError("; ".join(str(x["msg"]).removeprefix("Value error, ") for x in e.errors())) from None
        return self


class SlimRead(SlimArgs):
    path: str = Field(description="File to read, relative to the workspace.")


class SlimEdit(SlimArgs):
    path: str = Field(description="File to change, relative to the workspace.")
    old_text: str = Field(description="Lines copied exactly from the file, the ones to replace.")
    new_text: str = Field(description="The lines that replace old_text.")


class SlimWrite(SlimArgs):
    path: str = Field(description="File to write, relative to the workspace.")
    content: str = Field(description="The file's complete content.")


class SlimShell(SlimArgs):
    command: str = Field(min_length=1, description="A bash command, e.g. python -m pytest -q")


class SlimFinish(SlimArgs):
    summary: str = Field(min_length=1, description="What you changed and which command showed it works.")


def _onto(full: Tool) -> Any:
    """An executor that runs ``full`` with the slim arguments (every omitted field at its default)."""
    def execute(args: BaseModel, ctx: ToolContext) -> ToolResult:
        return full.execute(full.spec.args(**args.model_dump()), ctx)
    return execute


def slim(full: Tool, args: type[SlimArgs], description: str, execute: Any = None) -> Tool:
    args.full_args = full.spec.args
    return Tool(ToolSpec(full.spec.name, description, args, full.spec.annotations), execute or _onto(full))


REWRITE_MIN_SIMILARITY = 0.5


def rewrite_refusal(old: str, new: str, path: str) -> str | None:
    """Why replacing a file's text ``old`` with ``new`` is not a whole-file rewrite, or None if it is.

    A rewrite keeps most lines (difflib ratio of lines >= 0.5) and, for a valid .py file, stays valid
    Python. Measured on a 1.5B model: "saving" a fresh edit with write_file, its content
    ``[output of edit_file]`` or a two-line stub (ratio 0, the fix or the file destroyed), and also a
    correct whole config.ini after a botched edit (ratio 0.7) that a create-only rule refused. Whole
    files are the edit format weak models handle best (Aider's finding), so the right ones get through.
    """
    old_lines, new_lines = old.splitlines(), new.splitlines()
    ratio = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).ratio() if old_lines else 1.0
    if ratio < REWRITE_MIN_SIMILARITY:
        return (f"{path} already exists, and this content keeps only {ratio:.0%} of its lines, so it would "
                "replace the file rather than rewrite it. Nothing was written. To change a few lines use "
                "edit_file (each edit is saved at once; there is nothing to save afterwards); write_file "
                "takes the file's complete new content, every line, changed or not.")
    if path.endswith(".py") and (broken := breaks_python(old.encode(), new.encode())):
        return (f"Nothing was written: this content is not valid Python ({broken}), and {path} is now. "
                "Give the complete file, each line on its own line, indented like the file.")
    return None


def _rewrites_only(full: Tool) -> Any:
    """write_file that creates a file, or replaces one with a whole rewrite of it (rewrite_refusal)."""
    inner = _onto(full)

    def execute(args: SlimWrite, ctx: ToolContext) -> ToolResult:
        try:
            real = resolve_in_workspace(ctx.workspace, args.path)
            old = real.read_text(encoding="utf-8") if real.is_file() else None
        except (PathJailError, OSError, UnicodeDecodeError):
            old = None   # the full tool answers with its own message (jail, binary file)
        if old is not None and (refusal := rewrite_refusal(old, args.content, args.path)):
            return ToolResult.error(refusal)
        return inner(args, ctx)
    return execute


def python_error(source: bytes) -> str | None:
    """Why ``source`` is not valid Python ("line 4: invalid syntax"), or None."""
    try:
        ast.parse(source)
    except SyntaxError as e:
        return f"line {e.lineno}: {e.msg}" + (f": {e.text.strip()[:120]!r}" if e.text else "")
    except ValueError as e:   # null bytes
        return str(e)
    return None


def breaks_python(before: bytes, after: bytes) -> str | None:
    """Why ``after`` is invalid Python when ``before`` was valid (see python_error), else None: a
    file that was broken already is not the change's doing."""
    return python_error(after) if python_error(before) is None else None


def _keeps_python_valid(full: Tool) -> Any:
    """edit_file that is undone when it turns a valid .py file into invalid Python. Measured on a
    1.5B model: new_text glued the old body onto the new signature line (``def f(a, b=1):    if …``)
    and the next six turns went to a file pytest could not import. Told at once, with the line,
    the model retries the edit instead of chasing the import error."""
    inner = _onto(full)

    def execute(args: SlimEdit, ctx: ToolContext) -> ToolResult:
        try:
            real = resolve_in_workspace(ctx.workspace, args.path)
            before = real.read_bytes() if real.suffix == ".py" and real.is_file() else None
        except (PathJailError, OSError):
            before = None
        result = inner(args, ctx)
        if before is None or not result.ok:
            return result
        broken = breaks_python(before, real.read_bytes())
        if broken is None:
            return result
        real.write_bytes(before)
        if ctx.session is not None:
            ctx.session.record_write(real, before)
        return ToolResult.error(f"edit_file was undone: it made {args.path} invalid Python ({broken}). The file is "
                                "as it was. Try again: old_text copied exactly from the file, and new_text as "
                                "complete lines, each on its own line, indented like the file.")
    return execute


def slim_tools() -> list[Tool]:
    from keel.tools.edit import EDIT_FILE
    from keel.tools.files import READ_FILE, WRITE_FILE
    from keel.tools.shell import RUN_SHELL
    from keel.tools.task import FINISH

    return [
        slim(READ_FILE, SlimRead, "Show a file's lines, each as '<line number><TAB><line>'."),
        slim(EDIT_FILE, SlimEdit, "Change a file: replace old_text, copied exactly from the file (no line "
                                  "numbers), with new_text. The change is saved at once.",
             _keeps_python_valid(EDIT_FILE)),
        slim(WRITE_FILE, SlimWrite, "Write a file's complete content: a new file, or every line of an existing "
                                    "file, changed or not (for a few lines, edit_file is shorter).",
             _rewrites_only(WRITE_FILE)),
        slim(RUN_SHELL, SlimShell, "Run a bash command in the project directory; shows its exit code and output."),
        slim(FINISH, SlimFinish, "Call once the change is made and a command showed it works."),
    ]
