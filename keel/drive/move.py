"""A file move that change_file is asked for, made by keel, with the requires and imports that named it.

Why: measured on Qwen2.5-Coder-1.5B (js-rename-module: "rename lib/utils.js to lib/strings.js and update
everything that requires it"), the model called change_file(lib/utils.js, "Rename the file to
lib/strings.js …") three times; a move is not a rewrite, so the editor gave the file back unchanged
each time and the run ended on repetition. A small model asks for the move in words; keel can make it.

The pure core reads the move a note or task asks for (``move_asked``: the file named, or "it" / "the
file" in a sentence that names it, then "to" and a path of the same kind) and rewrites one importer's
references (``retarget``: JavaScript's relative require/import specifiers, Python's import statements).
``carry_move`` is the shell: it writes the new file and removes the old one through the session's
snapshots (so `keel undo` puts both back), rewrites every importer found by a word-bounded grep of the
old name, and lists the files that still mention it. A test the task does not ask to change is listed,
never rewritten (keel.drive.rename's rule).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from keel.core.request import Request, move_phrases
from keel.drive.rename import hit_lines, read_other, word_users, write_other
from keel.policy.beneath import anchor, read_beneath, unlink_beneath
from keel.policy.paths import PathJailError, resolve_in_workspace
from keel.tools.base import ToolContext, ToolResult, approval_refusal
from keel.tools.files import WRITE_FILE, file_session
from keel.verify.contract import JS_EXTS
from keel.verify.selfcheck import is_test_file

PRONOUNS = {"it", "the file", "this file", "that file", "the module", "this module", "that module"}
_JS_SPEC = re.compile(r"""(?P<head>(?:\brequire|\bimport)\s*\(\s*|\bfrom\s+|\bimport\s+)(?P<q>["'])"""
                      r"""(?P<spec>\.{1,2}/[^"'\n]*)(?P=q)""")
_PY_FROM = re.compile(r"^(?P<head>[ \t]*from[ \t]+)(?P<mod>\.*[\w.]*)(?P<mid>[ \t]+import[ \t]+)(?P<names>.*)$",
                      re.MULTILINE)
_PY_IMPORT = re.compile(r"^(?P<head>[ \t]*import[ \t]+)(?P<mods>[\w. \t,]+?)(?P<tail>[ \t]*(?:#.*)?)$", re.MULTILINE)


# -- the pure core -----------------------------------------------------------------------------------
def move_asked(path: str, note: str, request: Request) -> str | None:
    """The workspace path ``path`` is to be moved to, when the note (or else the request) asks for it
    (the phrases are read by keel.core.request.move_phrases; the request's once, in ``Request.moves``).

    Only a path of the same kind (suffix) as ``path`` counts, and the words before "to" must be the
    file itself (its path or name) or a pronoun: "move the helper to utils.py" asked of app.py is a
    change to app.py, not a move of it. In the task a pronoun counts only in a sentence that names
    the file ("lib/utils.js only has string helpers now, so please rename it to lib/strings.js")."""
    suffix = PurePosixPath(path).suffix
    if not suffix:
        return None
    for phrases, pronoun_ok in ((move_phrases(note), True), (request.moves, False)):
        for m in phrases:
            what = m.what.strip("`'\" ").lower()
            what = re.sub(r"^(?:the\s+)?(?:file|module)\s+", "", what).strip("`'\" ")
            named = what in (path.lower(), PurePosixPath(path).name.lower())
            if not named and what in PRONOUNS:
                named = pronoun_ok or _mentions(m.lead, path)
            new = posixpath.normpath(m.new).lstrip("/")
            if "/" not in m.new.lstrip("./"):
                new = posixpath.normpath(posixpath.join(posixpath.dirname(path), new))
            if named and PurePosixPath(new).suffix == suffix and new != path and not new.startswith(".."):
                return new
    return None


def _mentions(text: str, path: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])|(?<![\w/.-]){re.escape(PurePosixPath(path).name)}"
                     r"(?![\w/-])", text) is not None


def retarget(text: str, importer: str, old: str, new: str) -> str:
    """``text`` (the file ``importer``) with its references to module ``old`` pointing to ``new``
    (workspace paths); the text as it was when it has none."""
    if old.endswith(".py") and importer.endswith(".py"):
        return _retarget_python(text, importer, old, new)
    if old.endswith(JS_EXTS) and importer.endswith(JS_EXTS):
        return _JS_SPEC.sub(lambda m: _js_spec(m, importer, old, new), text)
    return text


def _js_spec(m: re.Match[str], importer: str, old: str, new: str) -> str:
    spec = m["spec"]
    base = posixpath.dirname(importer)
    target = posixpath.normpath(posixpath.join(base, spec))
    if target == old:
        keep_suffix = True
    elif target == posixpath.splitext(old)[0]:
        keep_suffix = False
    else:
        return m.group(0)
    rel = posixpath.relpath(new if keep_suffix else posixpath.splitext(new)[0], base or ".")
    rel = rel if rel.startswith("../") else "./" + rel
    return f"{m['head']}{m['q']}{rel}{m['q']}"


def module_of(path: str) -> str:
    """``shop/utils.py`` -> ``shop.utils`` (a package's ``__init__.py`` is the package)."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _retarget_python(text: str, importer: str, old: str, new: str) -> str:
    olds = {module_of(old)} | ({module_of(old)[4:]} if old.startswith("src/") else set())
    new_mod = module_of(new)[4:] if old.startswith("src/") and new.startswith("src/") else module_of(new)
    uses: list[tuple[str, str]] = []   # (a name the file uses the module as, the name it becomes)

    def from_line(m: re.Match[str]) -> str:
        mod = m["mod"]
        absolute = _absolute(mod, importer)
        if absolute in olds:
            return f"{m['head']}{_spelled(mod, new_mod, importer)}{m['mid']}{m['names']}"
        parent, _, name = module_of(old).rpartition(".")
        names = m["names"]
        if absolute == parent and re.search(rf"(?<![\w.]){re.escape(name)}\b(?!\s+as\b)", names) \
                and new_mod.rpartition(".")[0] == parent:   # from shop import utils: the same package
            new_name = new_mod.rpartition(".")[2]
            uses.append((name, new_name))
            names = re.sub(rf"(?<![\w.]){re.escape(name)}\b", new_name, names)
        return f"{m['head']}{mod}{m['mid']}{names}"

    def import_line(m: re.Match[str]) -> str:
        items = []
        for item in m["mods"].split(","):
            mod, _, alias = item.strip().partition(" as ")
            if mod.strip() in olds:
                if not alias.strip():
                    uses.append((mod.strip(), new_mod))
                item = item.replace(mod.strip(), new_mod, 1)
            items.append(item)
        return f"{m['head']}{','.join(items)}{m['tail']}"

    out = _PY_IMPORT.sub(import_line, _PY_FROM.sub(from_line, text))
    for used, now in uses:   # `utils.capitalize(…)` follows its import
        out = re.sub(rf"(?<![\w.]){re.escape(used)}\.(?=[A-Za-z_])", now + ".", out)
    return out


def _absolute(mod: str, importer: str) -> str:
    """A ``from`` module as an absolute dotted name (``..x`` seen from ``a/b/c.py`` is ``a.x``)."""
    dots = len(mod) - len(mod.lstrip("."))
    if not dots:
        return mod
    package = list(PurePosixPath(importer).parent.parts)
    package = package[:len(package) - (dots - 1)] if dots - 1 <= len(package) else []
    rest = mod[dots:]
    return ".".join([*package, *([rest] if rest else [])])


def _spelled(mod: str, new_mod: str, importer: str) -> str:
    """``new_mod`` written as ``mod`` was: relative when it was and the new module is in the same package."""
    if not mod.startswith("."):
        return new_mod
    here = ".".join(PurePosixPath(importer).parent.parts)
    parent, _, name = new_mod.rpartition(".")
    return f".{name}" if parent == here else new_mod


# -- the shell ---------------------------------------------------------------------------------------
def carry_move(ctx: ToolContext, old: str, new: str, protected: Callable[[str], bool]) -> ToolResult:
    """Move ``old`` to ``new`` (workspace paths) and point its importers to it; a clear error, with
    nothing changed, when the move cannot be made."""
    try:
        real_old = resolve_in_workspace(ctx.workspace, old, for_write=True)
        real_new = resolve_in_workspace(ctx.workspace, new, for_write=True)
    except PathJailError as e:
        return ToolResult.error(f"Cannot move {old} to {new}: {e}")
    if real_new.exists():
        return ToolResult.error(f"Cannot move {old} to {new}: {new} exists already. Change it with change_file "
                                "if it needs changing, or say why both files stay.")
    if not real_old.is_file():
        return ToolResult.error(f"Cannot move {old}: it is not a file.")
    refusal = approval_refusal(ctx, "edit", old) or approval_refusal(ctx, "edit", new)
    if refusal is not None:
        return ToolResult.error(refusal)
    try:
        data = read_beneath(*anchor(real_old))
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return ToolResult.error(f"Cannot move {old}: {e}")
    written = WRITE_FILE.execute(WRITE_FILE.spec.args(path=new, content=text), ctx)
    if not written.ok:
        return written
    session = file_session(ctx)
    try:
        session.snapshot(real_old)   # before the unlink: `keel undo` and the session put it back
        unlink_beneath(*anchor(real_old))
    except OSError as e:
        return ToolResult.error(f"Wrote {new}, but could not remove {old}: {e.strerror or e}. Both exist now.",
                                files_changed=written.files_changed)
    changed, left = _point_importers(ctx, old, new, protected)
    lines = [f"Moved {old} to {new} (the same bytes; {old} is gone)."]
    if changed:
        lines.append(f"Pointed the imports of {old} to {new} in: {', '.join(changed)}.")
    if left:
        lines.append("Left as they were: " + "; ".join(f"{p} ({why})" for p, why in left) + ".")
    lines.append(_still_mentioned(ctx, old))
    return ToolResult(ok=True, output="\n".join(line for line in lines if line),
                      files_changed=[old, new, *changed], meta={"moved": [old, new]})


def asked_move(ctx: ToolContext, shown: str, current: str | None, change: str, request: Request,
               checks: Any) -> ToolResult | None:
    """change_file's answer when its note or the request asks to move ``shown``: the move made, or why
    not; None when no move is asked."""
    new = move_asked(shown, change, request)
    if new is None:
        return None
    if current is None:   # asked again after the move: the old file must not come back as a new one
        return ToolResult.error(f"{shown} does not exist" + (f": it was moved to {new}; change {new} instead."
                                                              if _is_file(ctx, new) else "."))
    tests = checks is not None and not request.allows_test_changes
    return carry_move(ctx, shown, new, lambda p: tests and (is_test_file(p) or p in checks.protected))


def _is_file(ctx: ToolContext, path: str) -> bool:
    try:
        return resolve_in_workspace(ctx.workspace, path).is_file()
    except PathJailError:
        return False


def _point_importers(ctx: ToolContext, old: str, new: str,
                     protected: Callable[[str], bool]) -> tuple[list[str], list[tuple[str, str]]]:
    changed: list[str] = []
    left: list[tuple[str, str]] = []
    for path, _ in word_users(ctx, PurePosixPath(old).stem):
        if path == new:
            continue
        read = read_other(ctx, path)
        if isinstance(read, str):
            continue   # unread, it may not import the old file at all
        real, data, text = read
        after = retarget(text, path, old, new)
        if after == text:
            continue
        if protected(path):
            left.append((path, "a test, and the task does not ask to change tests"))
        elif (why := write_other(ctx, real, path, data, after)) is not None:
            left.append((path, why))
        else:
            changed.append(path)
    return changed, left


def _still_mentioned(ctx: ToolContext, old: str) -> str:
    """The lines that still name the old file (a comment, a README, package.json), for the model to judge."""
    stem = PurePosixPath(old).stem
    files = word_users(ctx, stem)
    if not files:
        return f"No file mentions {stem} any more."
    return "\n".join([f"Still mentioning {stem} (change these too if they mean the old file):", *hit_lines(files)])
