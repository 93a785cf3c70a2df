"""find_files and grep: locating code without reading whole files.

grep runs ripgrep when it can (the wheel's binary, found next to this interpreter: the
``rg`` on PATH may be a pyenv shim that costs 50-250 ms a call) and the in-process search in
keel.tools.textsearch otherwise (or when ctx.extra["grep_backend"] / $KEEL_GREP_BACKEND say
"python"). Both produce the same hits for the same tree (tests hold them to it):
the same ignore rules (keel.context.ignore), files with a NUL byte skipped as binary, secret
files skipped, and one line per match sorted by path then line number.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

from pydantic import Field

from keel.context.ignore import (
    TYPE_ALIASES,
    GlobMatcher,
    IgnoreRules,
    expand_braces,
    is_binary_file,
    rg_skip_globs,
)
from keel.policy.paths import (
    PathJailError,
    display_path,
    resolve_in_workspace,
    workspace_root,
)
from keel.policy.reads import hides_name, read_refusal, shows
from keel.policy.runner import Job, run
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
from keel.tools.textsearch import FileHits, GrepError, GrepQuery, confirm_hits, grep_python, sort_key

FIND_FILES_CAP = 200
LINE_CHARS_SHOWN = 500
RG_TIMEOUT_S = 120.0


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


def _run_collecting(cmd: list[str], cwd: str, policy: SandboxPolicy | None) -> tuple[bytes, str, int | None, bool]:
    """(stdout, stderr, exit code, timed out), through keel's runner like every process keel starts
    for the model: the scrubbed environment, the limits and the timeout. Not in the OS sandbox: the
    argv is keel's own (``--no-config``, never ``--pre``, no ``--follow``), so ripgrep runs no
    program and reads only the jail-resolved target, and the tier's start would cost more than the
    search (0.1 s under bubblewrap, 0.25 s under Landlock per call, measured). stdout is collected
    whole, as bytes (paths and lines need not be UTF-8)."""
    out = bytearray()
    result = run(Job(Path(cwd), argv=cmd, policy=policy, sandbox=False, timeout_s=RG_TIMEOUT_S, stderr_apart=True,
                     output_cap=4096, on_output=out.extend, aftercare=False))
    return bytes(out), result.stderr or "", result.exit_code, result.timed_out


def grep_rg(root: str, target: str, query: GrepQuery, *, require_git: bool, rg: str | None = None,
            policy: SandboxPolicy | None = None) -> list[FileHits]:
    rg = rg or find_rg()
    if rg is None:
        raise GrepError("ripgrep (rg) is not installed")
    cmd = rg_command(rg, query, target, require_git=require_git)
    stdout, stderr, returncode, timed_out = _run_collecting(cmd, root, policy)
    if timed_out:
        raise GrepError(f"search timed out after {RG_TIMEOUT_S:.0f}s; narrow it with path, glob or file_type")
    if returncode == 2 and not stdout:
        message = stderr.strip().removeprefix("rg: ")
        if "regex parse error" in message or "not allowed in a regex" in message:
            raise GrepError(f"invalid regex {query.pattern!r}: {message}")
        raise GrepError(message or "ripgrep failed")
    return _parse_heading_output(stdout, query.context > 0)


_BINARY_WARNING = b"WARNING: stopped searching binary file"


def _parse_heading_output(out: bytes, context: bool) -> list[FileHits]:
    """Split ``rg --heading --null`` output: per file "path\\0", its lines, then a blank line.

    Only paths are followed by NUL (rg stops reading a file at its first NUL byte), so the NULs
    locate every file; finding them is several times faster than scanning for blank lines.
    """
    hits = []
    warned = out.find(_BINARY_WARNING) != -1
    nuls = []
    nul = out.find(b"\0")
    while nul != -1:
        nuls.append(nul)
        nul = out.find(b"\0", nul + 1)
    path_start = 0
    for i, nul in enumerate(nuls):
        body = nul + 1
        if i + 1 < len(nuls):
            next_path = out.rfind(b"\n", body, nuls[i + 1]) + 1
            end = next_path - 2  # the last line's newline, then the blank line
        else:
            next_path = end = len(out) - 1 if out.endswith(b"\n") else len(out)
        # rg printed matches, then met a NUL past its first buffer: binary, skipped like the rest.
        if not (warned and out.find(_BINARY_WARNING, body, end) != -1):
            if context:
                # '^' would not match at ``body`` (a search start), so the first line is checked apart.
                matches = len(_MATCH_LINE.findall(out, body, end)) + bool(_FIRST_MATCH_LINE.match(out, body, end))
            else:
                matches = out.count(b"\n", body, end) + 1
            path = out[path_start:nul].decode("utf-8", "surrogateescape").removeprefix("./")
            hits.append(FileHits(path, matches, buf=out, start=body, end=end))
        path_start = next_path
    hits.sort(key=sort_key)
    return hits


_MATCH_LINE = re.compile(rb"\n\d+:")
_FIRST_MATCH_LINE = re.compile(rb"\d+:")


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
        refusal = read_refusal(ctx.approval, display_path(ctx.workspace, target), target)   # one read decision
        if refusal is not None:
            return ToolResult.error(refusal)
        try:
            if is_binary_file(str(target)):
                return ToolResult.error(f"{args.path} is a binary file; grep searches text files")
        except OSError as exc:
            return ToolResult.error(f"Cannot read {args.path}: {exc.strerror or exc}")
    rel = display_path(ctx.workspace, target)
    root = str(workspace_root(ctx.workspace))
    file_type = TYPE_ALIASES.get((args.file_type or "").lower(), args.file_type) or None
    query = GrepQuery(args.pattern, args.fixed_strings, args.case_insensitive, args.glob, file_type, args.context)
    rules = IgnoreRules(ctx.workspace)
    # One named file is read by keel itself, through keel.policy.beneath: rg opens a path by name
    # and would follow it if it were swapped for a symlink between the check above and the read.
    backend = "python" if target.is_file() else grep_backend(ctx)
    try:
        if backend == "rg":   # what rg read by path is confirmed through a no-follow read
            hits = confirm_hits(root, grep_rg(root, rel, query, require_git=rules.require_git, policy=ctx.sandbox),
                                args.max_results)
        else:
            hits = grep_python(root, rel, query, rules)
    except (GrepError, OSError) as exc:
        return ToolResult.error(str(exc))
    # the one read decision (keel.policy.reads), silently: naming a held-back file that matches would
    # tell what it holds, a pattern at a time
    may_show = shows(ctx.approval)
    hits = [h for h in hits if target.is_file() or may_show(Path(root) / h.path)]
    total = sum(h.matches for h in hits)
    meta = {"matches": total, "files": len(hits), "backend": backend}
    if not total:
        where = "the workspace" if rel == "." else rel
        return ToolResult(ok=True, output=f"No matches for {args.pattern!r} in {where}.", meta=meta)
    lines, shown = _render(hits, args.max_results, ctx.output_cap_bytes, args.context)
    head = f"Found {total} matching line{'s' * (total != 1)} in {len(hits)} file{'s' * (len(hits) != 1)}."
    if shown < total:
        head += f" Showing the first {shown}."
        if shown == args.max_results:
            lines.append(f"... {total - shown} more matches not shown; narrow with path, glob or file_type "
                         "or raise max_results.")
        else:
            lines.append(f"... {total - shown} more matches not shown (output limit of {ctx.output_cap_bytes} "
                         "bytes reached); narrow with path, glob or file_type.")
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
    hidden = hides_name(ctx.approval)
    found = sorted((e.path[root_len:] for e in IgnoreRules(ctx.workspace).walk_files(base)
                    if matcher.match(e.path[len(base) + 1:], False) and not hidden(Path(e.path))),
                   key=lambda p: p.replace("/", "\0"))
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
