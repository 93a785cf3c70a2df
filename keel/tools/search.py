"""find_files and grep: locating code without reading whole files.

grep runs ripgrep when it can (the wheel's binary, found next to this interpreter: the
``rg`` on PATH may be a pyenv shim that costs 50-250 ms a call) and an in-process Python
search otherwise. Both produce the same hits for the same tree (tests hold them to it):
the same ignore rules (keel.tools.ignore), files with a NUL byte skipped as binary, secret
files skipped, and one line per match sorted by path then line number.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from keel.policy.paths import (
    PathJailError,
    display_path,
    is_secret_path,
    resolve_in_workspace,
    workspace_root,
)
from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
from keel.tools.ignore import (
    FILE_TYPES,
    TYPE_ALIASES,
    GlobMatcher,
    IgnoreRules,
    expand_braces,
    fnmatch_any,
    rg_skip_globs,
)

FIND_FILES_CAP = 200
LINE_CHARS_SHOWN = 500
RG_TIMEOUT_S = 120.0

class GrepError(Exception):
    """The search itself failed (bad regex, unknown type, timeout): the message names why."""


@dataclass(frozen=True)
class GrepQuery:
    pattern: str
    fixed_strings: bool = False
    case_insensitive: bool = False
    glob: str | None = None
    file_type: str | None = None
    context: int = 0


class FileHits:
    """The hits in one file: ``matches`` counted up front, the lines parsed only when shown."""

    __slots__ = ("_body", "_lines", "matches", "path")

    def __init__(self, path: str, matches: int, *, body: bytes = b"", lines: list[tuple[int, bool, str]] | None = None):
        self.path, self.matches, self._body, self._lines = path, matches, body, lines

    def lines(self) -> list[tuple[int, bool, str]]:
        """(line number, is a match (not context), text) in line order."""
        if self._lines is None:
            found = (_RG_LINE.match(raw) for raw in self._body.split(b"\n"))
            self._lines = [(int(m[1]), m[2] == b":", m[3].decode("utf-8", "replace")) for m in found if m]
        return self._lines


# rg prints "12:text" for a matching line and "12-text" for a context line.
_RG_LINE = re.compile(rb"(\d+)([:-])(.*)", re.DOTALL)


def _sort_key(hit: FileHits) -> tuple[str, ...]:
    return tuple(hit.path.split("/"))


# --- ripgrep ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def find_rg() -> str | None:
    """The ripgrep binary: the wheel's copy beside this interpreter first, then PATH."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "rg")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("rg")


def rg_command(rg: str, query: GrepQuery, target: str, *, require_git: bool) -> list[str]:
    """The rg argv for ``query`` over ``target`` (relative to the workspace, the cwd)."""
    cmd = [rg, "--no-config", "--heading", "--null", "--line-number", "--with-filename", "--color=never",
           "--hidden", "--no-ignore-dot", "--no-ignore-global", "--no-ignore-exclude", "--no-messages"]
    if not require_git:
        cmd.append("--no-require-git")
    if query.fixed_strings:
        cmd.append("--fixed-strings")
    if query.case_insensitive:
        cmd.append("--ignore-case")
    if query.context:
        cmd.append(f"--context={query.context}")
    if query.file_type:
        cmd += ["--type", query.file_type]
    if query.glob:
        cmd += ["--glob", query.glob]
    for glob in rg_skip_globs():  # after the user's glob: later globs win, so these always apply
        cmd += ["--glob", glob]
    return [*cmd, "--regexp", query.pattern, "--", target]


def grep_rg(root: str, target: str, query: GrepQuery, *, require_git: bool, rg: str | None = None) -> list[FileHits]:
    rg = rg or find_rg()
    if rg is None:
        raise GrepError("ripgrep (rg) is not installed")
    cmd = rg_command(rg, query, target, require_git=require_git)
    try:
        proc = subprocess.run(cmd, cwd=root, stdin=subprocess.DEVNULL, capture_output=True, timeout=RG_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise GrepError(f"search timed out after {RG_TIMEOUT_S:.0f}s; narrow it with path, glob or file_type") from None
    if proc.returncode == 2 and not proc.stdout:
        message = proc.stderr.decode("utf-8", "replace").strip().removeprefix("rg: ")
        if "regex parse error" in message or "not allowed in a regex" in message:
            raise GrepError(f"invalid regex {query.pattern!r}: {message}")
        raise GrepError(message or "ripgrep failed")
    hits = []
    for block in proc.stdout.rstrip(b"\n").split(b"\n\n") if proc.stdout else ():
        path, _, body = block.partition(b"\0")
        if b"WARNING: stopped searching binary file" in body:
            continue  # a NUL turned up after the first buffer: binary, skipped like the rest
        if query.context:
            matches = len(re.findall(rb"^\d+:", body, re.MULTILINE))
        else:
            matches = body.count(b"\n") + 1
        name = os.fsdecode(path).removeprefix("./")
        hits.append(FileHits(name, matches, body=body))
    hits.sort(key=_sort_key)
    return hits


# --- the in-process fallback ---------------------------------------------------------------------

def compile_query(query: GrepQuery) -> re.Pattern[str]:
    if "\n" in query.pattern:
        raise GrepError("the pattern contains a newline; grep matches one line at a time")
    source = re.escape(query.pattern) if query.fixed_strings else query.pattern
    try:
        return re.compile(source, re.MULTILINE | (re.IGNORECASE if query.case_insensitive else 0))
    except re.error as exc:
        raise GrepError(f"invalid regex {query.pattern!r}: {exc}") from None


def _decode(data: bytes) -> str | None:
    """Text the way rg sees it: UTF-16 with a BOM transcoded, a UTF-8 BOM dropped, NUL bytes
    mean binary (None). Bytes that are not UTF-8 become lone surrogates (surrogateescape)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    if b"\0" in data:
        return None
    return data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")


# A byte that is not UTF-8, as surrogateescape decodes it.
_RAW_BYTE = re.compile("[\udc80-\udcff]")


def _shown(line: str) -> str:
    """A line for display: undecodable bytes become U+FFFD, as when rg's output is decoded."""
    if _RAW_BYTE.search(line) is None:
        return line
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _matches_outside_raw_bytes(regex: re.Pattern[str], line: str) -> bool:
    """rg never matches a byte that is not UTF-8 (not even with '.' or '[^a]'), so a line
    holding such bytes counts only if some match avoids them."""
    if _RAW_BYTE.search(line) is None:
        return True
    pos = 0
    while pos <= len(line):
        m = regex.search(line, pos)
        if m is None:
            return False
        if _RAW_BYTE.search(m.group()) is None:
            return True
        pos = m.start() + 1
    return False


def search_text(regex: re.Pattern[str], text: str) -> list[tuple[int, str]]:
    """(line number, line) for each line with a match: one regex scan over the whole text.

    A match that runs across a newline (``\\s``, ``[^x]`` ...) proves nothing about a single
    line, so that line is checked on its own, as rg's line-by-line search would.
    """
    found: list[tuple[int, str]] = []
    raw_bytes = _RAW_BYTE.search(text) is not None
    end = len(text) if text.endswith("\n") else len(text) + 1
    pos, line_no, counted = 0, 1, 0
    while pos < end:
        m = regex.search(text, pos)
        if m is None or m.start() >= end:
            break
        start = text.rfind("\n", 0, m.start()) + 1
        stop = text.find("\n", m.start())
        stop = len(text) if stop == -1 else stop
        line = text[start:stop]
        crossed = m.end() > stop and regex.search(line) is None
        if not crossed and (not raw_bytes or _matches_outside_raw_bytes(regex, line)):
            line_no += text.count("\n", counted, start)
            counted = start
            found.append((line_no, line))
        pos = stop + 1
    return found


def _with_context(found: list[tuple[int, str]], text: str, context: int) -> list[tuple[int, bool, str]]:
    if not context or not found:
        return [(n, True, _shown(line)) for n, line in found]
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    matched = {n for n, _ in found}
    wanted = sorted({k for n in matched for k in range(max(1, n - context), min(len(lines), n + context) + 1)})
    return [(k, k in matched, _shown(lines[k - 1])) for k in wanted]


def grep_python(root: str, target: str, query: GrepQuery, rules: IgnoreRules) -> list[FileHits]:
    """The same search as ``grep_rg`` without ripgrep; ``target`` is relative to ``root``."""
    regex = compile_query(query)
    literal = None
    if not query.case_insensitive and (query.fixed_strings or re.escape(query.pattern) == query.pattern):
        literal = query.pattern.encode()  # cheap bytes test before decoding a file
    type_globs: tuple[str, ...] = ()
    if query.file_type:
        if query.file_type not in FILE_TYPES:
            raise GrepError(f"unrecognized file type: {query.file_type} (known: {', '.join(sorted(FILE_TYPES))})")
        type_globs = FILE_TYPES[query.file_type]
    glob = query.glob or ""
    user_globs = GlobMatcher(expand_braces(glob.removeprefix("!"))) if glob else None
    whitelist = not glob.startswith("!")  # rg: a plain glob selects files, a '!glob' excludes them

    def decide(entry: os.DirEntry[str], is_dir: bool) -> bool | None:
        # rg's order: the glob override decides first, then .gitignore, then the type filter.
        if user_globs is not None:
            hit = user_globs.match(entry.path[len(root) + 1:], is_dir)
            if hit is not None:
                return hit == whitelist
            if whitelist and not is_dir:
                return False
        if type_globs and not is_dir and not fnmatch_any(entry.name, type_globs):
            return False
        return None

    start = os.path.join(root, target) if target != "." else root
    paths: Iterable[str] = [start] if os.path.isfile(start) else (e.path for e in rules.walk_files(start, decide))
    hits = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if literal is not None and literal not in data and data[:2] not in (b"\xff\xfe", b"\xfe\xff"):
            continue
        text = _decode(data)
        if text is None or not text:
            continue
        found = search_text(regex, text)
        if found:
            hits.append(FileHits(path[len(root) + 1:], len(found), lines=_with_context(found, text, query.context)))
    hits.sort(key=_sort_key)
    return hits


# --- the tools ---------------------------------------------------------------------------------

def _render(hits: list[FileHits], max_results: int, cap_bytes: int, context: int) -> tuple[list[str], int]:
    """Output lines for the first ``max_results`` matches within ``cap_bytes``; returns (lines, shown)."""
    out: list[str] = []
    shown = size = 0
    for hit in hits:
        if shown >= max_results:
            break
        prev, last_match = -1, -1
        for line_no, is_match, text in hit.lines():
            # Past the last match shown, only its trailing context lines still belong.
            if shown >= max_results and (is_match or line_no > last_match + context):
                break
            if context and out and line_no != prev + 1:
                out.append("--")
                size += 3
            text = text.removesuffix("\r")
            if len(text) > LINE_CHARS_SHOWN:
                text = f"{text[:LINE_CHARS_SHOWN]}… [line cut: {len(text)} chars]"
            sep = ":" if is_match else "-"
            line = f"{hit.path}{sep}{line_no}{sep}{text}"
            size += len(line.encode()) + 1
            if size > cap_bytes:
                return out, shown
            out.append(line)
            prev = line_no
            if is_match:
                shown, last_match = shown + 1, line_no
    return out, shown


class GrepArgs(ToolArgs):
    pattern: str = Field(description="Regex to search for, e.g. 'def load_\\w+' or 'TODO'. Use fixed_strings=true for literal text.")
    path: str = Field(".", description="File or directory to search, relative to the workspace.")
    fixed_strings: bool = Field(False, description="Treat pattern as literal text, not a regex.")
    case_insensitive: bool = Field(False, description="Ignore letter case.")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.py', 'src/**/*.ts', '*.{js,jsx}'. Prefix '!' to exclude.")
    file_type: str | None = Field(None, description="Only files of this type, e.g. py, js, ts, rust, go, java, cpp, md.")
    context: int = Field(0, ge=0, le=20, description="Lines of context before and after each match.")
    max_results: int = Field(100, ge=1, le=1_000_000, description="Most matching lines to show.")


def grep_backend(ctx: ToolContext) -> str:
    """'rg' or 'python': ctx.extra['grep_backend'] or $KEEL_GREP_BACKEND may force the fallback."""
    wanted = str(ctx.extra.get("grep_backend") or os.environ.get("KEEL_GREP_BACKEND") or "auto")
    return "python" if wanted == "python" or find_rg() is None else "rg"


def _grep(args: GrepArgs, ctx: ToolContext) -> ToolResult:
    if not args.pattern:
        return ToolResult.error("pattern is empty; give a regex or literal text to search for")
    if "\n" in args.pattern:
        return ToolResult.error("the pattern contains a newline; grep matches one line at a time")
    try:
        target = resolve_in_workspace(ctx.workspace, args.path)
    except PathJailError as exc:
        return ToolResult.error(str(exc))
    if not target.exists():
        return ToolResult.error(f"No such file or directory: {args.path}")
    if target.is_file():
        if is_secret_path(target):
            return ToolResult.error(f"{args.path} is a secret file; grep does not search it (read_file asks for approval)")
        with open(target, "rb") as fh:
            if _decode(fh.read()) is None:
                return ToolResult.error(f"{args.path} is a binary file; grep searches text files")
    rel = display_path(ctx.workspace, target)
    root = str(workspace_root(ctx.workspace))
    file_type = TYPE_ALIASES.get((args.file_type or "").lower(), args.file_type) or None
    query = GrepQuery(args.pattern, args.fixed_strings, args.case_insensitive, args.glob, file_type, args.context)
    rules = IgnoreRules(ctx.workspace)
    backend = grep_backend(ctx)
    try:
        if backend == "rg":
            hits = grep_rg(root, rel, query, require_git=rules.require_git)
        else:
            hits = grep_python(root, rel, query, rules)
    except GrepError as exc:
        return ToolResult.error(str(exc))
    hits = [h for h in hits if not is_secret_path(Path(h.path))]
    total = sum(h.matches for h in hits)
    meta = {"matches": total, "files": len(hits), "backend": backend}
    if not total:
        where = "the workspace" if rel == "." else rel
        return ToolResult(ok=True, output=f"No matches for {args.pattern!r} in {where}.", meta=meta)
    lines, shown = _render(hits, args.max_results, ctx.output_cap_bytes, args.context)
    head = f"Found {total} matching line{'s' * (total != 1)} in {len(hits)} file{'s' * (len(hits) != 1)}."
    if shown < total:
        head += f" Showing the first {shown}."
        lines.append(f"... {total - shown} more matches not shown; narrow with path, glob or file_type"
                     + (" or raise max_results." if shown == args.max_results else "."))
    return ToolResult(ok=True, output="\n".join([head, *lines]), meta=meta)


class FindFilesArgs(ToolArgs):
    pattern: str = Field(description="Glob for file paths: '*.py' matches at any depth; 'src/**/test_*.py'; '*.{ts,tsx}'.")
    path: str = Field(".", description="Directory to search under, relative to the workspace.")


def _find_files(args: FindFilesArgs, ctx: ToolContext) -> ToolResult:
    pattern = args.pattern.strip().removeprefix("./")
    if not pattern or pattern.startswith("!"):
        return ToolResult.error("pattern must be a glob such as '*.py' or 'src/**/*.ts'")
    try:
        target = resolve_in_workspace(ctx.workspace, args.path)
    except PathJailError as exc:
        return ToolResult.error(str(exc))
    if not target.is_dir():
        return ToolResult.error(f"{args.path} is not a directory" if target.exists() else f"No such directory: {args.path}")
    matcher = GlobMatcher(expand_braces(pattern))
    base = str(target)
    root_len = len(str(workspace_root(ctx.workspace))) + 1
    found = sorted((e.path[root_len:] for e in IgnoreRules(ctx.workspace).walk_files(base)
                    if matcher.match(e.path[len(base) + 1:], False)), key=lambda p: tuple(p.split("/")))
    rel = display_path(ctx.workspace, target)
    if not found:
        return ToolResult(ok=True, output=f"No files match {pattern!r} under {rel} (matched against paths relative "
                          f"to {rel}; .gitignore'd and build/cache dirs are skipped).", meta={"files": 0})
    shown = found[:FIND_FILES_CAP]
    lines = [f"{len(found)} file{'s' * (len(found) != 1)} match {pattern!r} under {rel}:", *shown]
    if len(found) > len(shown):
        lines.append(f"... {len(found) - len(shown)} more files not shown; narrow the pattern or path.")
    return ToolResult(ok=True, output="\n".join(lines), meta={"files": len(found)})


FIND_FILES = Tool(
    spec=ToolSpec(
        name="find_files",
        description="Find files by name with a glob. Returns workspace-relative paths, sorted; "
                    "skips .gitignore'd files and build/cache dirs (node_modules, .venv, ...).",
        args=FindFilesArgs, annotations=ToolAnnotations(read_only=True, idempotent=True)),
    execute=_find_files,
)

GREP = Tool(
    spec=ToolSpec(
        name="grep",
        description="Search file contents with a regex (ripgrep syntax). Returns 'path:line:text' lines sorted by "
                    "path and line; skips .gitignore'd, binary and build/cache files.",
        args=GrepArgs, annotations=ToolAnnotations(read_only=True, idempotent=True)),
    execute=_grep,
)
