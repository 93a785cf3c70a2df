"""A rename carried through the workspace by refactoring: after change_file's rewrite made it in one
file (``Spread``), or straight from the request when the task names the old and the new name
(``rename_asked``).

Why the request: measured on Qwen2.5-Coder-1.5B, the model's change notes for a rename are often
wrong (it asked the editor for MAX_RETRIES_S, or for a rename the task never named), and the rewrite
follows the note. When the task itself says "rename MAX_RETRY to MAX_RETRIES" and the file still has
MAX_RETRY, keel makes that rename with rope (Python) or tree-sitter (JavaScript) in every file, the
named one included, and asks the editor nothing; a wrong note cannot spoil it.

Files of the same kind as the named one are rewritten (up to MAX_OTHER_FILES others), through
write_file (path jail, approval, checkpoints), each from the bytes read for the refactoring (a file
changed since is refused as stale). Python goes through rope, JavaScript through tree-sitter (see
keel.drive.refactor for strings and comments); other kinds (TypeScript, Go, …) word for word. A test
the task does not ask to change is listed, never rewritten: the gate runs the original tests anyway
(keel.verify.verifier puts tampered tests back), so a renamed test only earns a refusal; the model
can keep the old name as an alias or say why the test must change.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from keel.core.request import Request
from keel.drive.refactor import JS_PARSED, RefactorError, js_rename, python_rename, request_renames
from keel.drive.rename import (
    MAX_OTHER_FILES,
    Files,
    Outcome,
    Rename,
    applied,
    python_sources,
    reachable_names,
    read_other,
    renames_in,
    word_for_word,
    word_users,
    write_other,
)
from keel.policy.beneath import anchor, read_beneath
from keel.policy.paths import PathJailError, resolve_in_workspace
from keel.tools.base import ToolContext, ToolResult, assist_acted
from keel.tools.files import WRITE_FILE, file_session
from keel.verify.selfcheck import is_test_file


def plan(ctx: ToolContext, renames: list[Rename], path: str, source: str) -> Files:
    """The renames made in every file of ``path``'s kind, ``path`` read as ``source`` (its text before
    a rewrite, or as it is)."""
    users = {p for r in renames for p, _ in word_users(ctx, r.old)} | {path}
    if path.endswith(".py"):
        return _python_plan(ctx, renames, path, source, users)
    out = Files()
    suffix = PurePosixPath(path).suffix
    for other in sorted(p for p in users if PurePosixPath(p).suffix == suffix):
        read = read_other(ctx, other)
        if isinstance(read, str):
            out.left.append((other, read))
            continue
        text = was = source if other == path else read[2]
        try:
            for r in renames:
                text = js_rename(text, r.old, r.new) if path.endswith(JS_PARSED) else word_for_word(text, [r])
        except RefactorError as e:
            out.left.append((other, str(e)))
            continue
        if text != was:
            out.texts[other], out.reads[other] = text, read
    return out


def _python_plan(ctx: ToolContext, renames: list[Rename], path: str, source: str, users: set[str]) -> Files:
    """rope's rename over a copy of the workspace's Python files."""
    read = python_sources(ctx, users, path, source)
    out = Files(reads=read.reads, left=read.left)
    files = read.texts
    if path not in files:
        return out
    changed: set[str] = set()
    try:
        for r in renames:
            made = python_rename(files, path, r.old, r.new)
            files.update({p: t for p, t in made.items() if t is not None})
            changed |= set(made)
    except RefactorError as e:
        out.left = [(p, f"not renamed: {e}") for p in sorted(users) if p.endswith(".py") and p != path]
        return out
    out.texts = {p: files[p] for p in sorted(changed) if p in files}
    return out


def _write_others(ctx: ToolContext, made: Files, main: str, protected: Callable[[str], bool], outcome: Outcome,
                  originals: dict[str, str]) -> None:
    """Write the plan's files other than ``main`` (up to MAX_OTHER_FILES); tests are listed."""
    outcome.left += [(p, why) for p, why in made.left if p != main]
    written = 0
    for path in sorted(p for p in made.texts if p != main):
        why = "a test, and the task does not ask to change tests" if protected(path) else None
        if why is None and written >= MAX_OTHER_FILES:
            why = f"past the {MAX_OTHER_FILES} files rewritten in one call"
        if why is None:
            written += 1
            real, data, old = made.reads[path]
            why = write_other(ctx, real, path, data, made.texts[path])
            if why is None:
                originals[path] = old
                outcome.changed.append(path)
                continue
        outcome.left.append((path, why))


def _protected(checks: Any, request: Request) -> Callable[[str], bool]:
    return lambda p: (checks is not None and (is_test_file(p) or p in checks.protected)
                      and not request.allows_test_changes)


class Spread:
    """Carries the rename a change_file rewrite made to the other files, once per call."""

    def __init__(self, ctx: ToolContext, request: Request, change: str, path: str, before: str | None, checks: Any):
        self.ctx, self.path, self.before = ctx, path, before
        self.candidates = renames_in(f"{change}\n{request.text}")   # any wording: the rewrite must have made it
        self.protected = _protected(checks, request)
        self.outcome: Outcome | None = None
        self.originals: dict[str, str] = {}

    def after(self, written: ToolResult, text: str) -> None:
        """After the main file was written with ``text``: rename in the other files that use an old name."""
        if self.outcome is not None or not written.ok or self.before is None:
            return
        renames = applied(self.candidates, self.before, text, self.path)
        if not renames:
            return
        self.outcome = Outcome(renames)
        made = plan(self.ctx, renames, self.path, self.before)
        _write_others(self.ctx, made, self.path, self.protected, self.outcome, self.originals)
        if self.outcome.changed:
            assist_acted(self.ctx, "rename_spread", ", ".join(self.outcome.changed))

    def undo(self) -> None:
        """Put the other files back as they were (the main file's rewrite was not kept)."""
        for path, text in self.originals.items():
            try:
                real = resolve_in_workspace(self.ctx.workspace, path, for_write=True)
                file_session(self.ctx).record_read(real, read_beneath(*anchor(real)))
            except (PathJailError, OSError):
                continue
            WRITE_FILE.execute(WRITE_FILE.spec.args(path=path, content=text), self.ctx)
        if self.outcome is not None:
            self.outcome.changed.clear()
        self.originals.clear()

    def report(self, written: ToolResult | None = None) -> str:
        """For the tool result: what was renamed where, what was left, who still uses an old name.
        ``written`` (the main file's result) gets the other changed files in its files_changed."""
        if self.outcome is None:
            return ""
        for r in self.outcome.renames:
            self.outcome.still[r.old] = word_users(self.ctx, r.old)
        if written is not None:
            written.files_changed += [p for p in self.outcome.changed if p not in written.files_changed]
        return self.outcome.render()


def rename_asked(ctx: ToolContext, shown: str, current: str | None, request: Request,
                 checks: Any) -> ToolResult | None:
    """change_file's answer when the task names a rename whose old name ``shown`` still defines or uses:
    the rename made by refactoring in every file, this one included; None when there is none to make."""
    protected = _protected(checks, request)
    if current is None or protected(shown) or not shown.endswith((".py", *JS_PARSED)):
        return None
    names = reachable_names(current) if shown.endswith(".py") else None
    renames = [r for r in request_renames(request) if (r.old in names if names is not None else _js_uses(current, r))]
    if not renames:
        return None
    made = plan(ctx, renames, shown, current)
    if shown not in made.texts or made.texts[shown] == current:
        return None   # rope could not make it here: the editor tries, as for any change
    real, data, _ = made.reads[shown]
    if (why := write_other(ctx, real, shown, data, made.texts[shown])) is not None:
        return ToolResult.error(f"Cannot change {shown}: {why}.")
    outcome = Outcome(renames, changed=[shown])
    _write_others(ctx, made, shown, protected, outcome, {})
    for r in renames:
        outcome.still[r.old] = word_users(ctx, r.old)
    done = ", ".join(f"{r.old} to {r.new}" for r in renames)
    lines = [f"Renamed {done} as the task asks, by refactoring the code (no rewrite of yours was needed) in: "
             f"{', '.join(outcome.changed)}.", *outcome.render().splitlines()[1:],
             f"If {shown} needs other changes too, call change_file again with just those."]
    return ToolResult(ok=True, output="\n".join(lines), files_changed=list(outcome.changed),
                      meta={"renamed": [[r.old, r.new] for r in renames]})


def _js_uses(text: str, rename: Rename) -> bool:
    try:
        return js_rename(text, rename.old, rename.new) != text
    except RefactorError:
        return False
