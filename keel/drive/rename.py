"""A rename that change_file made in one file, carried to the other files that use the old name.

Why: measured on Qwen2.5-Coder-1.5B, "Rename the constant MAX_RETRY to MAX_RETRIES everywhere
(settings.py and client.py)" changed settings.py and never client.py: the model called change_file on
settings.py again and again (the run ended on repetition), and "rename a function used in two files"
ended on failing checks. A small model does not go looking for the other users of a name; keel can.

The pure core finds the renames a change or request asks for (``renames_in``, keel.core.request, which
reads the request's once), keeps those the rewrite
really made (``applied``) and writes the report; ``Spread`` is the shell: after change_file wrote its
file, it greps the workspace for the old names (word-bounded, keel's own grep: ignore rules, no binary
or secret files), renames word for word in each other file of the same kind (up to MAX_OTHER_FILES),
writes it through write_file (path jail, approval, checkpoints), and lists the files still using an
old name so the model can finish the job.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from keel.context.ignore import IgnoreRules
from keel.core.request import Rename, Request, renames_in
from keel.policy.beneath import anchor, read_beneath
from keel.policy.paths import PathJailError, is_secret_name, resolve_in_workspace, workspace_root
from keel.tools.base import ToolContext, ToolResult
from keel.tools.files import WRITE_FILE, file_session
from keel.tools.search import grep_backend, grep_python, grep_rg
from keel.tools.textsearch import GrepError, GrepQuery
from keel.verify.selfcheck import is_test_file

MAX_OTHER_FILES = 20     # other files renamed in one change_file call (word for word: no model request)
MAX_FILES_LISTED = 8     # files still using an old name, in the tool result
_BUILTINS = frozenset(dir(builtins))
MAX_LINES_LISTED = 3     # of each such file
LINE_CHARS_LISTED = 120


def uses(name: str, text: str) -> int:
    """How often ``name`` occurs in ``text`` as a whole word."""
    return len(re.findall(rf"(?<![\w$]){re.escape(name)}(?![\w$])", text))


def word_for_word(text: str, renames: list[Rename]) -> str:
    """``text`` with each old name replaced as a whole word by its new one."""
    for r in renames:
        text = re.sub(rf"(?<![\w$]){re.escape(r.old)}(?![\w$])", r.new, text)   # identifiers: no escapes
    return text


def module_names(source: str) -> set[str] | None:
    """Names a Python module defines or imports at its top level, and those of its top-level classes
    (methods, class attributes): the names other files can use. None when it does not parse."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in [*body, *(n for c in body if isinstance(c, ast.ClassDef) for n in c.body)]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    return names


def _attributes(source: str) -> set[str]:
    """Attribute names the module uses (``settings.MAX_RETRY``, ``client.get``)."""
    return {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)}


def applied(candidates: list[Rename], before: str, after: str, path: str) -> list[Rename]:
    """The renames the rewrite of ``path`` made: the old name used less than before and the new one
    more. In Python the old name must be one other files can use (``module_names``): renaming a local
    variable concerns no other file. With no candidate made, a Python rewrite that swapped exactly one
    top-level name for another, the old one gone entirely, is a rename too ("rename a function")."""
    python = path.endswith(".py")
    shared = module_names(before) if python else None
    reachable = (shared | _attributes(before)) if shared is not None else None   # `settings.MAX_RETRY` too
    made = [r for r in candidates if uses(r.old, after) < uses(r.old, before) and uses(r.new, after) > uses(r.new, before)
            and (reachable is None or r.old in reachable)]
    if made or not python or shared is None:
        return made
    now = module_names(after) or set()
    gone, added = shared - now, now - shared
    if len(gone) == 1 and len(added) == 1:
        rename = Rename(gone.pop(), added.pop())
        if not uses(rename.old, after) and not uses(rename.new, before) and rename.old not in _BUILTINS:
            return [rename]
    return []


def _reason(problem: str) -> str:
    """A refusal from judge, without its advice to the model about the main file."""
    return problem.split(", so nothing was written")[0].split(". ")[0].rstrip(".")


@dataclass
class Outcome:
    """What the spread did: the files changed, those left as they were (and why), those still using an old name."""

    renames: list[Rename]
    changed: list[str] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)
    still: dict[str, list[tuple[str, list[tuple[int, str]]]]] = field(default_factory=dict)

    def render(self) -> str:
        done = ", ".join(f"{r.old} to {r.new}" for r in self.renames)
        lines = []
        if self.changed:
            lines.append(f"Renamed {done} in the other files that used it too: {', '.join(self.changed)}.")
        if self.left:
            lines.append("Left as they were: " + "; ".join(f"{p} ({why})" for p, why in self.left) + ".")
        for old, files in self.still.items():
            if not files:
                lines.append(f"No file uses {old} any more.")
                continue
            lines.append(f"Still using {old} (change these too, or say why they keep it):")
            lines += hit_lines(files)
        return "\n".join(lines)


def hit_lines(files: list[tuple[str, list[tuple[int, str]]]]) -> list[str]:
    """``word_users``' answer as tool-result lines: a few lines of the first files, then how many more."""
    lines = []
    for path, hits in files[:MAX_FILES_LISTED]:
        lines += [f"  {path}:{n}: {text.strip()[:LINE_CHARS_LISTED]}" for n, text in hits[:MAX_LINES_LISTED]]
        if not hits:
            lines.append(f"  {path}")
    if len(files) > MAX_FILES_LISTED:
        lines.append(f"  … and {len(files) - MAX_FILES_LISTED} more files")
    return lines


# -- the shell ---------------------------------------------------------------------------------------
class Spread:
    """Carries the rename a change_file rewrite made to the other files, once per call.

    Tests follow the main file's rule: a test file (or one the checks depend on) is not rewritten
    unless the task asks for test changes. A rename breaks a test that imports the old name, but the
    gate runs the original tests anyway (keel.verify.verifier: tampered tests are put back), so a
    renamed test would only earn a "tampered_tests" refusal; the test is listed instead, and the model
    can keep the old name as an alias or say why the test must change."""

    def __init__(self, ctx: ToolContext, request: Request, change: str, path: str, before: str | None, checks: Any):
        self.ctx, self.request, self.path, self.before, self.checks = ctx, request, path, before, checks
        # the note's renames first, then the request's (read once: keel.core.request)
        self.candidates = list(dict.fromkeys([*renames_in(change), *request.renames]))
        self.outcome: Outcome | None = None
        self.originals: dict[str, str] = {}

    def after(self, written: ToolResult, text: str) -> None:
        """After the main file was written with ``text``: rewrite the other users of each renamed name."""
        if self.outcome is not None or not written.ok or self.before is None:
            return
        renames = applied(self.candidates, self.before, text, self.path)
        if not renames:
            return
        self.outcome = outcome = Outcome(renames)
        users: dict[str, list[str]] = {}
        for r in renames:
            for path, _ in word_users(self.ctx, r.old):
                users.setdefault(path, []).append(r.old)
        # Files of another kind (docs, configuration) are only listed: a code rename need not carry to prose.
        suffix, asked = PurePosixPath(self.path).suffix, 0
        for path in sorted(p for p in users if p != self.path and PurePosixPath(p).suffix == suffix):
            why = self._not_ours(path)
            if why is None and asked >= MAX_OTHER_FILES:
                why = f"past the {MAX_OTHER_FILES} files rewritten in one call"
            if why is None:
                asked += 1
                why = self._rewrite(path, [r for r in renames if r.old in users[path]])
            if why is not None:
                outcome.left.append((path, why))
            else:
                outcome.changed.append(path)

    def _not_ours(self, path: str) -> str | None:
        """Why ``path`` is not rewritten here, or None."""
        protected = self.checks is not None and (is_test_file(path) or path in self.checks.protected)
        if protected and not self.request.allows_test_changes:
            return "a test, and the task does not ask to change tests"
        return None

    def _rewrite(self, path: str, renames: list[Rename]) -> str | None:
        """``path`` with the renames made word for word, written; None when written, else why not.

        Word for word, not by the editor: measured on the 1.5B model (py-rename-constant), the editor
        asked to "rename MAX_RETRY to MAX_RETRIES here too" in client.py wrote MAX_RETRIES_S and
        BACKOFF_S_S, and the checks failed on names it made up. An identifier replaced as a whole word
        is the rename and nothing else."""
        read = read_other(self.ctx, path)
        if isinstance(read, str):
            return read
        real, data, old = read
        new = word_for_word(old, renames)
        if path.endswith(".py") and module_names(old) is not None and module_names(new) is None:
            return "renamed word for word it would not parse"
        if (why := write_other(self.ctx, real, path, data, new)) is not None:
            return why
        self.originals[path] = old
        return None

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


def word_users(ctx: ToolContext, name: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """The workspace files that use ``name`` as a word, with their lines, as the grep tool finds them."""
    root, rules = str(workspace_root(ctx.workspace)), IgnoreRules(ctx.workspace)
    query = GrepQuery(rf"\b{re.escape(name)}\b")
    try:
        hits = (grep_rg(root, ".", query, require_git=rules.require_git) if grep_backend(ctx) == "rg"
                else grep_python(root, ".", query, rules))
    except (GrepError, OSError):
        return []
    return [(h.path, [(n, t) for n, is_match, t in h.lines() if is_match]) for h in hits
            if not is_secret_name(h.path)]


def read_other(ctx: ToolContext, path: str) -> tuple[Path, bytes, str] | str:
    """A file keel rewrites beside the one the model named (a rename carried, an import pointed to a
    moved file): its real path, bytes and text, or why it cannot be read (the jail, read approval)."""
    try:
        real = resolve_in_workspace(ctx.workspace, path, for_write=True)
        may_read = getattr(ctx.approval, "reads_without_asking", None)
        if may_read is not None and not may_read(real):
            return "reading it needs approval"
        data = read_beneath(*anchor(real))
        return real, data, data.decode("utf-8")
    except (PathJailError, OSError, UnicodeDecodeError) as e:
        return f"cannot read it: {e}"


def write_other(ctx: ToolContext, real: Path, path: str, data: bytes, text: str) -> str | None:
    """Write ``text`` over ``path``, read just now as ``data`` by this tool (write_file: jail, approval,
    checkpoints); None when written, else why not."""
    file_session(ctx).record_read(real, data)
    written = WRITE_FILE.execute(WRITE_FILE.spec.args(path=path, content=text), ctx)
    return None if written.ok else _reason(written.output)
