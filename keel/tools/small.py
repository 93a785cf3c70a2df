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
files left out and to look again after an edit. Changes go through change_file (keel.drive.change:
the model says what to change, a focused request writes the file); edit_file stays for files too
long to be rewritten in one reply.
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

from pydantic import BaseModel, Field, ValidationError, model_validator

from keel.policy.beneath import anchor, read_beneath, write_beneath_atomic
from keel.policy.paths import PathJailError, resolve_in_workspace
from keel.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolSpec, assist_acted

NOTE_MAX_CHARS = 600   # a sentence or two, with room; a longer one is a reply running on


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


class SlimShell(SlimArgs):
    command: str = Field(min_length=1, description="A bash command, e.g. python -m pytest -q")


class SlimFinish(SlimArgs):
    # a maxLength makes it a note: under constrained decoding, one line that must end (keel/engine/grammar.py)
    summary: str = Field(min_length=1, max_length=NOTE_MAX_CHARS,
                         description="What you changed and which command showed it works.")


def _onto(full: Tool) -> Any:
    """An executor that runs ``full`` with the slim arguments (every omitted field at its default)."""
    def execute(args: BaseModel, ctx: ToolContext) -> ToolResult:
        return full.execute(full.spec.args(**args.model_dump()), ctx)
    return execute


def slim(full: Tool, args: type[SlimArgs], description: str, execute: Any = None) -> Tool:
    args.full_args = full.spec.args
    return Tool(ToolSpec(full.spec.name, description, args, full.spec.annotations), execute or _onto(full))


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
            # read and put back with no symlink followed (keel.policy.beneath)
            before = read_beneath(*anchor(real)) if real.suffix == ".py" and real.is_file() else None
        except (PathJailError, OSError):
            before = None
        result = inner(args, ctx)
        if before is None or not result.ok:
            return result
        try:
            broken = breaks_python(before, read_beneath(*anchor(real)))
        except OSError:
            return result
        if broken is None:
            return result
        try:
            write_beneath_atomic(*anchor(real), before)
        except OSError as e:
            return ToolResult.error(f"edit_file made {args.path} invalid Python ({broken}) and putting it back "
                                    f"failed: {e.strerror or e}")
        if ctx.session is not None:
            ctx.session.record_write(real, before)
        assist_acted(ctx, "python_edit_undo", f"{args.path}: {broken}")
        return ToolResult.error(f"edit_file was undone: it made {args.path} invalid Python ({broken}). The file is "
                                "as it was. Try again: old_text copied exactly from the file, and new_text as "
                                "complete lines, each on its own line, indented like the file.")
    return execute


def small_tools(change_file: Tool | None, *, undo_broken_python: bool = True) -> list[Tool]:
    """The small profile's tools; ``change_file`` is keel.drive.change's (it drives the run's model, so it
    is built above the loop and passed in), None when that assist is off; ``undo_broken_python``: an
    edit_file that breaks a valid .py file is undone (the python_edit_undo assist).

    change_file, not write_file: a whole-file rewrite is the edit format a small model handles best
    (Aider's finding), and measured on a 1.5B model it wrote the right file when asked for it in a
    short request of its own, where in the conversation it sent stubs and ``[output of edit_file]``."""
    from keel.tools.edit import EDIT_FILE
    from keel.tools.files import READ_FILE
    from keel.tools.shell import RUN_SHELL
    from keel.tools.task import FINISH

    return [
        slim(READ_FILE, SlimRead, "Show a file's lines, each as '<line number><TAB><line>'."),
        *([change_file] if change_file is not None else []),
        slim(EDIT_FILE, SlimEdit, "Change a few lines of a file: replace old_text, copied exactly from the file "
                                  "(no line numbers), with new_text. The change is saved at once.",
             _keeps_python_valid(EDIT_FILE) if undo_broken_python else None),
        slim(RUN_SHELL, SlimShell, "Run a bash command in the project directory; shows its exit code and output."),
        slim(FINISH, SlimFinish, "Call once the change is made and a command showed it works."),
    ]
