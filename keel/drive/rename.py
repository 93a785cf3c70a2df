"""A rename that change_file made in one file, carried to the other files that use the old name.

Why: measured on Qwen2.5-Coder-1.5B, "Rename the constant MAX_RETRY to MAX_RETRIES everywhere
(settings.py and client.py)" changed settings.py and never client.py: the model called change_file on
settings.py again and again (the run ended on repetition), and "rename a function used in two files"
ended on failing checks. A small model does not go looking for the other users of a name; keel can.

The pure core reads the renames a change or request asks for (``renames_in``, keel.core.request), keeps those the rewrite
really made (``applied``) and writes the report (``Outcome``); the helpers below it find the files
that use a name (keel's own grep: ignore rules, no binary or secret files) and read and write a file
beside the one the model named (path jail, read approval, write_file's checkpoints). The shell that
carries a rename is keel.drive.spread; the refactorings themselves (rope, tree-sitter) are
keel.drive.refactor.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from keel.context.ignore import IgnoreRules
from keel.core.request import Rename as Rename  # re-exported: the drive's modules import it here
from keel.core.request import renames_in as renames_in
from keel.core.request.edits import BUILTIN_NAMES
from keel.policy.beneath import anchor, read_beneath
from keel.policy.paths import PathJailError, is_secret_name, resolve_in_workspace, workspace_root
from keel.policy.reads import shows
from keel.tools.base import ToolContext
from keel.tools.files import WRITE_FILE, file_session
from keel.tools.search import grep_backend, grep_python, grep_rg
from keel.tools.textsearch import GrepError, GrepQuery, confirm_hits

MAX_OTHER_FILES = 20     # other files renamed in one change_file call (by refactoring: no model request)
MAX_FILES_LISTED = 8     # files still using an old name, in the tool result
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


def reachable_names(source: str) -> set[str] | None:
    """``module_names`` and the attribute names the module uses (``settings.MAX_RETRY``, ``client.get``):
    the names a rename in this module can concern in other files. None when it does not parse."""
    shared = module_names(source)
    if shared is None:
        return None
    return shared | {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)}


def applied(candidates: list[Rename], before: str, after: str, path: str) -> list[Rename]:
    """The renames the rewrite of ``path`` made: the old name used less than before and the new one
    more. In Python the old name must be one other files can use (``module_names``): renaming a local
    variable concerns no other file. With no candidate made, a Python rewrite that swapped exactly one
    top-level name for another, the old one gone entirely, is a rename too ("rename a function")."""
    python = path.endswith(".py")
    shared = module_names(before) if python else None
    reachable = reachable_names(before) if python else None   # `settings.MAX_RETRY` too
    made = [r for r in candidates if uses(r.old, after) < uses(r.old, before) and uses(r.new, after) > uses(r.new, before)
            and (reachable is None or r.old in reachable)]
    if made or not python or shared is None:
        return made
    now = module_names(after) or set()
    gone, added = shared - now, now - shared
    if len(gone) == 1 and len(added) == 1:
        rename = Rename(gone.pop(), added.pop())
        if not uses(rename.old, after) and not uses(rename.new, before) and rename.old not in BUILTIN_NAMES:
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


# -- reading and writing the other files ----------------------------------------------------------------
def word_users(ctx: ToolContext, name: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """The workspace files that use ``name`` as a word, with their lines, as the grep tool finds them."""
    root, rules = str(workspace_root(ctx.workspace)), IgnoreRules(ctx.workspace)
    query = GrepQuery(rf"\b{re.escape(name)}\b")
    try:
        hits = (confirm_hits(root, grep_rg(root, ".", query, require_git=rules.require_git, policy=ctx.sandbox),
                             1 << 62)
                if grep_backend(ctx) == "rg" else grep_python(root, ".", query, rules))
    except (GrepError, OSError):
        return []
    may_show = shows(ctx.approval)   # the one read decision: these lines go to the model
    return [(h.path, [(n, t) for n, is_match, t in h.lines() if is_match]) for h in hits
            if may_show(Path(root) / h.path)]


MAX_PYTHON_FILES = 2000        # Python files read for one refactoring (rope's copy of the workspace)
MAX_PYTHON_BYTES = 1_000_000   # a larger file is not read for it


@dataclass
class Files:
    """Files of a refactoring: their texts (as read, or as the refactoring makes them), the bytes each
    was read as (written back through write_file, which refuses a file changed since), and the files
    that use a name it concerns but were left out, and why (rope refuses a whole refactoring for one
    file that does not parse)."""

    texts: dict[str, str] = field(default_factory=dict)
    reads: dict[str, tuple[Path, bytes, str]] = field(default_factory=dict)
    left: list[tuple[str, str]] = field(default_factory=list)


def python_sources(ctx: ToolContext, users: set[str], path: str | None = None, source: str = "") -> Files:
    """The workspace's Python files (ignore rules, regular files only: a symlink is never read; no
    secrets; read approval), ``path`` read as ``source``; those of ``users`` that cannot be read or
    do not parse are listed in ``left``."""
    out = Files()
    root = workspace_root(ctx.workspace)
    for entry in IgnoreRules(ctx.workspace).walk_files(str(root), with_stat=True):
        rel = Path(entry.path).relative_to(root).as_posix()
        if not rel.endswith(".py") or is_secret_name(rel):
            continue
        why = (f"past the {MAX_PYTHON_FILES} files read for a refactoring" if len(out.texts) >= MAX_PYTHON_FILES
               else "too large to read for a refactoring" if entry.stat().st_size > MAX_PYTHON_BYTES
               else None)
        read = read_other(ctx, rel) if why is None else why
        if isinstance(read, str):
            out.left += [(rel, read)] if rel in users else []
            continue
        text = source if rel == path else read[2]
        if rel in users and rel != path and module_names(text) is None:
            out.left.append((rel, "it does not parse"))
            continue
        out.texts[rel], out.reads[rel] = text, read
    return out


def read_other(ctx: ToolContext, path: str) -> tuple[Path, bytes, str] | str:
    """A file keel rewrites beside the one the model named (a rename carried, an import pointed to a
    moved file): its real path, bytes and text, or why it cannot be read (the jail, read approval)."""
    try:
        real = resolve_in_workspace(ctx.workspace, path, for_write=True)
        if not shows(ctx.approval)(real):
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
