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
MAX_CARRIED = 2   # modules the failing tests test, tried in turn


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


def under_failing(path: str, failing_tests: Sequence[str], files: Collection[str], protected: Collection[str],
                  read: Callable[[str], str | None]) -> list[UnderTest]:
    """The modules the failing tests test (``read``: a test file's text), in order, when ``path`` is not
    one of them; neither tests nor files the checks depend on; at most MAX_CARRIED."""
    found: dict[str, UnderTest] = {}
    for test in dict.fromkeys(t.split("::", 1)[0] for t in failing_tests):
        if test in files and is_test_file(test) and (text := read(test)) is not None:
            for m in modules_under_test(test, text, files):
                found.setdefault(m.path, m)
    if path in found:
        return []
    return [m for m in found.values() if not is_test_file(m.path) and m.path not in protected][:MAX_CARRIED]


def one_call_away(path: str, first: ToolResult, ctx: ToolContext,
                  change: Callable[[str, str, ToolContext], ToolResult]) -> ToolResult:
    """After ``first`` (change_file's result for ``path``, the checks failing no less): the change asked in
    the module ``path`` calls, or else in the modules the failing tests test (``change(path, note, ctx)``:
    change_file's own, for one file), each kept only when the checks fail less; ``first`` as it is
    otherwise. Why the second: py-config-default on the 1.5B sent the task's three-file change to
    config.toml eight times; the tests that failed test settings.py and client.py, which it never named."""
    run = ctx.run
    verifier = run.verifier if run is not None else None
    protected = verifier.protected if verifier is not None else set()
    try:
        real = resolve_in_workspace(ctx.workspace, path)
        text = read_beneath(*anchor(real)).decode("utf-8")
    except (PathJailError, OSError, UnicodeDecodeError):
        return first
    shown, files = display_path(ctx.workspace, real), workspace_files(ctx.workspace)
    if (found := callee(shown, text, files, protected)) is not None:
        return _carried(shown, first, [found], ctx, change, callee_note, f"which {shown} calls", "one call away")
    targets = under_failing(shown, first.meta.get("failing_tests") or (), files, protected, lambda t: _text(ctx, t))
    return _carried(shown, first, targets, ctx, change, tested_note, "which the failing tests test",
                    "in the code the failing tests test")


def _carried(shown: str, first: ToolResult, targets: Sequence[UnderTest], ctx: ToolContext,
             change: Callable[[str, str, ToolContext], ToolResult], note: Callable[[str, UnderTest], str],
             which: str, where: str) -> ToolResult:
    """The change asked in each of ``targets`` in turn, kept together when the checks then fail less than
    after ``first``, each put back as it was otherwise. Together: a module the tests need changed may
    not lower the count alone (request_options() carrying a timeout that load_settings() does not read
    yet), so a change is judged with the others."""
    originals: dict[str, bytes] = {}
    last: ToolResult | None = None
    start = (first.meta.get("failing") or (0, 0))[1]
    for target in targets:
        if (original := _bytes(ctx, target.path)) is None:
            continue
        originals[target.path] = original
        assist_acted(ctx, "callee_change", f"{shown} -> {target.path}")
        second = change(target.path, note(shown, target), ctx)
        if second.ok:
            last = second
            if not (second.meta.get("failing") or (0, 0))[1]:
                break
    end = (last.meta.get("failing") or (0, start))[1] if last is not None else start
    names = ", ".join(originals)
    if last is not None and end < start:
        last.files_changed = list(dict.fromkeys([*first.files_changed, *(p for p in originals)]))
        last.meta["failing"] = ((first.meta.get("failing") or (start, start))[0], end)
        # All pass: the news leads, and the caller's "nothing was written, say exactly which line ..." goes.
        # Measured (py-discount-cent): behind that advice the pass came last, the 1.5B sent another change
        # and the run ran out of time with the task done and unclaimed.
        lead = f"{first.output}\n\n" if end else f"{first.output.splitlines()[0]}\n\n" if first.files_changed \
            else f"Your change to {shown} is not needed: "
        last.output = f"{lead}The cause was {where}: keel made the change in {names}, {which}.\n{last.output}"
        return last
    for path, original in originals.items():
        if _bytes(ctx, path) != original:   # no better: the module goes back as it was
            put_back_file(ctx, path, original)
    if originals:
        first.output += (f"\n\nkeel also tried the change in {names}, {which}; the checks did not fail less, "
                         f"so {'it is as it was' if len(originals) == 1 else 'they are as they were'}.")
    return first


def tested_note(changed: str, target: UnderTest) -> str:
    names = ", ".join(f"{n}()" for n in target.names[:MAX_NAMES]) or "its code"
    return (f"A change to {changed} did not make the failing tests pass; they test {names} from {target.path}, "
            f"so make the change the task asks for in {target.path}. {changed} stays as it is.")


def _bytes(ctx: ToolContext, path: str) -> bytes | None:
    try:
        return read_beneath(*anchor(resolve_in_workspace(ctx.workspace, path)))
    except (PathJailError, OSError):
        return None


def _text(ctx: ToolContext, path: str) -> str | None:
    data = _bytes(ctx, path)
    try:
        return data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None


def put_back_file(ctx: ToolContext, path: str, original: bytes) -> None:
    """``path`` written back to ``original`` through write_file (so the run's undo and checkpoints hold it)."""
    from keel.tools.files import WRITE_FILE, file_session

    current = _bytes(ctx, path)
    if current is not None:
        file_session(ctx).record_read(resolve_in_workspace(ctx.workspace, path), current)
    WRITE_FILE.execute(WRITE_FILE.spec.args(path=path, content=original.decode("utf-8")), ctx)


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
