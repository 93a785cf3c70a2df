"""The cause one call away (the callee_change assist): when change_file's rewrite of a file leaves the
project's checks failing as much as before, and that file takes its names from one other module of the
project, keel asks for the change there too and keeps it only if the checks then fail less.

Why: on medium tasks where the symptom is in one module and the bug in the helper it calls (an invoice's
due date wrong because the date parser it calls counts months from 1), the 1.5B model changed the
caller's constants four times in a row ("now: 0" to "now: 4", "30", "31", "30"); the editor, shown only
the caller, could not fix the helper, and the hedge "fix the cause of the bug, where it is" could not
move it to another file. A small model does not go looking one call further; keel can, as it carries
a change aimed at a test to the code the test tests (keel.verify.redirect).

The same holds for work the task spreads over files: asked to read a due date in parse.py and show
it in render.py, the 1.5B changed parse.py four times and never render.py. When the checks still fail
after a change, its result names the code files the task names that no change has touched yet.

``callee`` and ``untouched`` are pure; ``where_else`` is the shell change_file calls, with its own
one-file change passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from keel.policy.beneath import anchor, read_beneath
from keel.policy.paths import PathJailError, display_path, resolve_in_workspace
from keel.tools.base import ToolContext, ToolResult, assist_acted
from keel.verify.redirect import UnderTest, modules_under_test, workspace_files
from keel.verify.selfcheck import is_code_file, is_test_file

MAX_NAMES = 4   # named in the note


def callee(path: str, text: str, files: Collection[str], protected: Collection[str]) -> UnderTest | None:
    """The one module of the project ``path`` imports names from (neither a test nor a file the checks
    depend on), or None when there is none or more than one: a guess among several is not keel's to make."""
    found = [m for m in modules_under_test(path, text, files)
             if m.path != path and not is_test_file(m.path) and m.path not in protected]
    return found[0] if len(found) == 1 else None


def callee_note(caller: str, found: UnderTest) -> str:
    names = ", ".join(f"{n}()" for n in found.names[:MAX_NAMES]) or "code"
    return (f"A change to {caller} did not make the failing checks pass; {caller} calls {names} from {found.path}, "
            f"so the cause is likely in {found.path}. Fix it there; {caller} stays as it is.")


def one_call_away(path: str, first: ToolResult, ctx: ToolContext,
                  change: Callable[[str, str, ToolContext], ToolResult]) -> ToolResult:
    """After ``first`` (change_file's result for ``path``, the checks failing no less): the change asked in
    the module ``path`` calls (``change(path, note, ctx)``: change_file's own, for one file), kept only
    when the checks fail less; ``first`` as it is otherwise."""
    run = ctx.run
    verifier = run.verifier if run is not None else None
    try:
        real = resolve_in_workspace(ctx.workspace, path)
        text = read_beneath(*anchor(real)).decode("utf-8")
    except (PathJailError, OSError, UnicodeDecodeError):
        return first
    shown = display_path(ctx.workspace, real)
    found = callee(shown, text, workspace_files(ctx.workspace), verifier.protected if verifier is not None else ())
    if found is None:
        return first
    try:
        other = resolve_in_workspace(ctx.workspace, found.path)
        original = read_beneath(*anchor(other))
    except (PathJailError, OSError):
        return first
    assist_acted(ctx, "callee_change", f"{shown} -> {found.path}")
    second = change(found.path, callee_note(shown, found), ctx)
    before, after = second.meta.get("failing") or (0, 0)
    if second.ok and after < before:
        second.files_changed = list(dict.fromkeys([*first.files_changed, *second.files_changed]))
        # All pass: the news leads, and the caller's "nothing was written, say exactly which line ..." goes.
        # Measured (py-discount-cent): behind that advice the pass came last, the 1.5B sent another change
        # and the run ran out of time with the task done and unclaimed.
        lead = f"{first.output}\n\n" if after else f"Your change to {shown} is not needed: "
        second.output = (f"{lead}The cause was one call away: keel made the change in {found.path}, "
                         f"which {shown} calls.\n{second.output}")
        return second
    if read_beneath(*anchor(other)) != original:   # no better: the module goes back as it was
        from keel.tools.files import WRITE_FILE, file_session

        file_session(ctx).record_read(other, read_beneath(*anchor(other)))
        WRITE_FILE.execute(WRITE_FILE.spec.args(path=found.path, content=original.decode("utf-8")), ctx)
    first.output += (f"\n\nkeel also tried the change in {found.path}, which {shown} calls; the checks did not "
                     "fail less, so it is as it was.")
    return first


def untouched(path: str, named: Sequence[str], unchanged: Callable[[str], bool]) -> list[str]:
    """The code files of ``named`` (the request's) other than ``path``, neither tests nor documents, that
    ``unchanged`` says exist as the run found them."""
    return [f for f in dict.fromkeys(named) if f != path and is_code_file(f) and unchanged(f)]


def where_else(path: str, result: ToolResult, ctx: ToolContext,
               change: Callable[[str, str, ToolContext], ToolResult]) -> ToolResult:
    """After change_file's ``result`` for ``path`` left the checks failing: when it did not help, the
    change asked in the module ``path`` calls (``one_call_away``); while they still fail, the code files
    the task names that no change has touched, named at the end of the result."""
    before, after = result.meta.get("failing") or (0, 0)
    if after >= before:
        result = one_call_away(path, result, ctx, change)
        before, after = result.meta.get("failing") or (before, after)
    run = ctx.run
    start = run.verifier.start if run is not None and run.verifier is not None else None
    if not after or run is None or start is None:
        return result

    def unchanged(name: str) -> bool:
        try:
            real = resolve_in_workspace(ctx.workspace, name)
            return real.is_file() and start.text(name) == read_beneath(*anchor(real)).decode("utf-8")
        except (PathJailError, OSError, UnicodeDecodeError):
            return False
    held = run.verifier.protected if run.verifier is not None else set()   # the checks' scripts, kept files
    if rest := untouched(path, [f for f in run.request.files if f not in held], unchanged):
        assist_acted(ctx, "callee_change", f"{path}: named {', '.join(rest)}")
        result.output += (f"\n\nThe task also names {', '.join(rest)}, unchanged so far: the checks that still fail "
                          f"may need {'it' if len(rest) == 1 else 'them'} changed too (change_file with that path).")
    return result
