"""list_dir, read_file and write_file.

read_file shows every line exactly as stored (tabs and trailing spaces kept) after a
six-column line number and a TAB, so text copied from its output matches the file. What a
reader cannot see (CRLF endings, a BOM, a missing final newline, bytes that are not UTF-8) is
stated in the header instead. write_file refuses to overwrite a file this session has not
read, or one that changed on disk since, and snapshots the old bytes before replacing them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from dataclasses import replace
from pathlib import Path

from pydantic import Field

from keel.context.ignore import IgnoreRules
from keel.context.output import saved_output
from keel.policy.beneath import anchor, read_beneath, read_beneath_stat
from keel.policy.listing import Entry
from keel.policy.paths import (
    PathJailError,
    display_path,
    is_secret_path,
    resolve_in_workspace,
    workspace_root,
)
from keel.policy.reads import hides_name, read_refusal
from keel.tools.base import (
    Tool,
    ToolAnnotations,
    ToolArgs,
    ToolContext,
    ToolResult,
    ToolSpec,
    approval_refusal,
)
from keel.tools.diffs import preview_diff
from keel.tools.path_hints import directory_hint, not_found
from keel.tools.seams import FileFacts
from keel.tools.session import FileSession
from keel.tools.textfile import decode_lenient, shown_text, write_workspace_file

READ_DEFAULT_LIMIT = 2000
READ_CAP_BYTES = 38_000     # stays under the registry's 40,000-character result cap, which cuts the middle
LINE_CAP_CHARS = 2000
READ_MAX_FILE_BYTES = 32 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192

_BINARY_KINDS = {
    "image": "png jpg jpeg gif bmp ico webp tif tiff psd heic", "PDF document": "pdf",
    "archive": "zip gz tgz bz2 xz zst 7z rar tar jar war whl egg", "audio": "mp3 wav ogg flac m4a",
    "video": "mp4 mov avi mkv webm", "font": "ttf otf woff woff2 eot", "database": "sqlite sqlite3 db",
    "compiled code": "so dylib dll exe o a lib obj pyc pyo class wasm",
    "serialized data": "npy npz pkl pickle parquet h5 onnx pt pth safetensors",
}
BINARY_EXTENSIONS = {f".{ext}": kind for kind, exts in _BINARY_KINDS.items() for ext in exts.split()}
_MAGIC = ((b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
          (b"%PDF", "PDF document"), (b"PK\x03\x04", "ZIP archive"), (b"\x1f\x8b", "gzip archive"),
          (b"\x7fELF", "ELF executable"), (b"SQLite format 3", "SQLite database"))
# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))

_session_lock = threading.Lock()


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word[:-1] + 'ies' if word.endswith('y') else word + 's'}"


def file_session(ctx: ToolContext) -> FileFacts:
    """The session's file facts; made on first use (read-only tools run in parallel threads)."""
    with _session_lock:
        if ctx.session is None:
            ctx.session = FileSession()
        return ctx.session


# --- list_dir ------------------------------------------------------------------------------------

class ListDirArgs(ToolArgs):
    path: str = Field(".", description="Directory to list, relative to the workspace.")
    depth: int = Field(2, ge=1, le=10, description="How many levels deep to show (1 = only direct entries).")
    max_entries: int = Field(200, ge=1, le=5000, description="Most entries to show.")


def _list_dir(args: ListDirArgs, ctx: ToolContext) -> ToolResult:
    try:
        target = resolve_in_workspace(ctx.workspace, args.path)
    except PathJailError as exc:
        return ToolResult.error(str(exc))
    if not target.is_dir():
        if target.exists():
            return ToolResult.error(f"{args.path} is a file, not a directory; use read_file to read it")
        return not_found(ctx, args.path, target)
    rules = IgnoreRules(ctx.workspace)
    hidden = hides_name(ctx.approval)
    children: dict[str, list[Entry]] = {}
    ignored_names: list[str] = []
    ignored = not_shown = unexpanded = shown = 0
    unreadable: set[str] = set()
    queue = deque([(str(target), 1)])
    # Breadth first, so a capped listing still shows every top-level entry before any deep one.
    while queue:
        directory, level = queue.popleft()
        if shown >= args.max_entries:
            unexpanded += 1
            continue
        try:
            kept, skipped = rules.scan(directory, with_stat=True)
        except OSError:
            unreadable.add(directory)
            continue
        kept = [e for e in kept if not hidden(Path(e.path))]    # a read(...) deny rule: not even the name
        ignored += len(skipped)
        if level == 1:
            ignored_names = sorted(e.name + ("/" if e.is_dir() else "") for e in skipped)
        kept.sort(key=lambda e: (not e.is_dir(), e.name.lower(), e.name))
        room = max(0, args.max_entries - shown)
        children[directory], not_shown = kept[:room], not_shown + max(0, len(kept) - room)
        shown += len(children[directory])
        queue.extend((e.path, level + 1) for e in children[directory]
                     if level < args.depth and e.is_dir())

    lines = [f"{display_path(ctx.workspace, target)}/ (depth {args.depth}):"]

    def render(directory: str, indent: str) -> None:
        for entry in children.get(directory, []):
            if entry.is_symlink():
                lines.append(f"{indent}{entry.name} -> {entry.target if entry.target is not None else '?'}")
            elif entry.is_dir():
                note = " (unreadable)" if entry.path in unreadable else ""
                if entry.path not in children and not note:
                    with contextlib.suppress(OSError):
                        count = len(rules.scan(entry.path)[0])
                        note = f" ({plural(count, 'entry')})" if count else " (empty)"
                lines.append(f"{indent}{entry.name}/{note}")
                render(entry.path, indent + "  ")
            else:
                lines.append(f"{indent}{entry.name} ({human_size(entry.stat().st_size)})")

    render(str(target), "  ")
    if shown == 0:
        lines.append("  (empty)")
    # Stay under the registry's result cap rather than have it cut the middle of the tree.
    total = 0
    for i, line in enumerate(lines):
        total += len(line.encode()) + 1
        if total > READ_CAP_BYTES - 200:
            del lines[i:]
            lines.append(f"... listing cut at {i - 1} entries to fit the output limit; list a subdirectory "
                         "or lower depth.")
            break
    if not_shown or unexpanded:
        extra = f" ({plural(unexpanded, 'directory')} not expanded)" if unexpanded else ""
        more = f"{not_shown} more {'entry' if not_shown == 1 else 'entries'}"
        lines.append(f"... {more} not shown{extra}; list a subdirectory or raise max_entries.")
    if ignored:
        names = ", ".join(ignored_names[:8]) + (", ..." if len(ignored_names) > 8 else "")
        lines.append(f"{plural(ignored, 'entry')} ignored (.gitignore, build/cache dirs){': ' + names if names else ''}")
    return ToolResult(ok=True, output="\n".join(lines), meta={"shown": shown, "ignored": ignored})


# --- read_file -----------------------------------------------------------------------------------

class ReadFileArgs(ToolArgs):
    path: str = Field(description="File to read, relative to the workspace.")
    offset: int | None = Field(None, ge=1, description="First line to show, 1-based (default 1).")
    limit: int | None = Field(None, ge=1, description=f"How many lines to show (default {READ_DEFAULT_LIMIT}).")


def _binary_kind(real: Path, head: bytes) -> str | None:
    kind = BINARY_EXTENSIONS.get(real.suffix.lower())
    if kind is None and b"\0" in head[:BINARY_SNIFF_BYTES]:
        kind = next((label for magic, label in _MAGIC if head.startswith(magic)), "binary data")
    return kind


def _bom(data: bytes) -> tuple[bytes, str]:
    """The byte-order mark ``data`` starts with and its codec, or (b"", "utf-8")."""
    return next(((bom, codec) for bom, codec in _BOMS if data.startswith(bom)), (b"", "utf-8"))


def _decode(data: bytes) -> tuple[str, list[str]]:
    """The text and what the reader should be told about how it was stored."""
    bom, codec = _bom(data)
    if bom:
        note = "starts with a UTF-8 byte-order mark (not shown)" if codec == "utf-8" else f"is {codec.upper()} encoded"
        return data[len(bom):].decode(codec, "replace"), [note]
    raw, encoding = decode_lenient(data)   # as edit_file decodes it: a line copied from here matches there
    shown = shown_text(raw)
    return shown, ([] if shown == raw and encoding == "utf-8" else [
        "is not valid UTF-8; " + ("it was read as latin-1" if encoding == "latin-1" else "each invalid byte is shown "
                                  "as its latin-1 character") + " (edit_file matches it the same way, keeping the bytes)"])


def _read_file(args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
    """read_file; a missing path that is a saved output named short (checks/002-test-….log) reads it, and
    a missing pytest test id (test_money.py::test_cents, copied from a failure) reads its file. Measured on
    the 1.5B (py-price-format): "File not found: test_money.py::test_thousands_separator", then a claim."""
    result = _read_one(args, ctx)
    if result.ok or not result.output.startswith("File not found"):
        return result
    if (saved := saved_output(ctx.session_dir, args.path, by_name=True)) is not None:
        return _read_one(args.model_copy(update={"path": str(saved)}), ctx)   # a saved output, named short
    file, _, test = args.path.partition("::")
    if not (file and test):
        return result
    whole = _read_one(args.model_copy(update={"path": file}), ctx)
    return replace(whole, output=f"({args.path} is a pytest test id; its file:)\n{whole.output}") if whole.ok else result


def _read_one(args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
    # A command output run_shell saved in the session directory (its reduced view names the file).
    saved = saved_output(ctx.session_dir, args.path)
    try:
        real = saved or resolve_in_workspace(ctx.workspace, args.path)
    except PathJailError as exc:
        return ToolResult.error(str(exc))
    shown = display_path(ctx.workspace, real)
    if not real.exists():
        return not_found(ctx, args.path, real)
    if real.is_dir():
        return ToolResult.error(f"{shown} is a directory, not a file"
                                + (directory_hint(ctx, args.path) or "; use list_dir to see what it contains."))
    if not real.is_file():
        return ToolResult.error(f"{shown} is not a regular file (a device, socket or pipe); it cannot be read")
    # the one read decision (keel.policy.reads); the name the model used counts too (a link named .env)
    named = Path(args.path) if is_secret_path(Path(args.path)) else real
    refusal = None if saved else read_refusal(ctx.approval, shown, named)
    if refusal is not None:
        return ToolResult.error(refusal)
    try:
        # Opened with no symlink followed: a file swapped for a link since the jail's check is refused.
        data, st = read_beneath_stat(*anchor(real, None if saved else workspace_root(ctx.workspace)),
                                     limit=READ_MAX_FILE_BYTES + 1)
        if st.st_size > READ_MAX_FILE_BYTES or len(data) > READ_MAX_FILE_BYTES:
            return ToolResult.error(f"{shown} is {human_size(st.st_size)}, too large for read_file; search it with "
                                    "grep or show a slice with run_shell (e.g. sed -n '100,200p').")
    except OSError as exc:
        return ToolResult.error(f"Cannot read {shown}: {exc.strerror or exc}")
    bom, codec = _bom(data)
    # UTF-16/32 text is full of NUL bytes; anything else with NULs is binary.
    kind = None if bom and codec != "utf-8" else _binary_kind(real, data[:BINARY_SNIFF_BYTES])
    if kind is not None:
        return ToolResult.error(f"{shown} is a binary file ({kind}, {human_size(len(data))}); read_file only shows text.")
    file_session(ctx).record_read(real, data)
    text, notes = _decode(data)
    lines = text.split("\n") if text else []
    if text.endswith("\n"):
        lines.pop()
    total = len(lines)
    if total == 0:
        return ToolResult(ok=True, output=f"File: {shown} is empty (0 lines).", meta={"lines": 0})
    terminated = total if text.endswith("\n") else total - 1
    crlf = sum(1 for line in lines[:terminated] if line.endswith("\r"))
    if crlf:
        notes.append("uses CRLF line endings (the \\r is not shown)" if crlf == terminated
                     else f"has mixed line endings: {crlf} of {terminated} lines end with CRLF (the \\r is not shown)")
    if not text.endswith("\n"):
        notes.append("has no newline at the end")
    first = args.offset or 1
    if first > total:
        return ToolResult.error(f"offset {first} is past the end of {shown}, which has {total} lines.")
    end = min(total, first - 1 + (args.limit or READ_DEFAULT_LIMIT))
    body: list[str] = []
    size_out = 0
    for index in range(first - 1, end):
        line = lines[index]
        if crlf and index < terminated:
            line = line.removesuffix("\r")
        if len(line) > LINE_CAP_CHARS:
            line = f"{line[:LINE_CAP_CHARS]}… [line cut: {len(line)} chars]"
        row = f"{index + 1:>6}\t{line}"
        size_out += len(row.encode()) + 1
        if size_out > READ_CAP_BYTES and body:
            break
        body.append(row)
    last = first + len(body) - 1
    head = f"File: {shown} ({total} lines); showing lines {first}-{last}."
    if notes:
        head += " The file " + "; ".join(notes) + "."
    if last < total:
        body.append(f"... truncated: showing lines {first}-{last} of {total}. Read more with offset={last + 1}")
    return ToolResult(ok=True, output="\n".join([head, *body]), meta={"lines": total, "first": first, "last": last})


# --- write_file ----------------------------------------------------------------------------------

class WriteFileArgs(ToolArgs):
    path: str = Field(description="File to create or overwrite, relative to the workspace.")
    content: str = Field(description="The complete new content of the file.")


GUT_MIN_LINES = 5


def gutting(old: bytes, content: str) -> str | None:
    """Why an overwrite that would reduce a file of several lines to one line is refused, or None.
    Measured: a 1.5B model "wrote" shipping.py as ``[output of edit_file]``, its 11 lines gone. A
    real rewrite of a file keeps more than one line; emptying a file on purpose is content "".
    """
    old_lines = old.count(b"\n") + (1 if old and not old.endswith(b"\n") else 0)
    if old_lines < GUT_MIN_LINES or not content.strip() or "\n" in content.strip():
        return None
    return (f"write_file would replace the file's {old_lines} lines with the single line {content.strip()[:80]!r}; "
            "nothing was written. write_file's content is the complete new file; to change part of it, "
            "use edit_file with old_text copied from the file.")


def _write_file(args: WriteFileArgs, ctx: ToolContext) -> ToolResult:
    try:
        real = resolve_in_workspace(ctx.workspace, args.path, for_write=True)
    except PathJailError as exc:
        return ToolResult.error(str(exc) + directory_hint(ctx, args.path))
    shown = display_path(ctx.workspace, real)
    root = workspace_root(ctx.workspace)
    session = file_session(ctx)
    existed = real.exists()
    content, notes = args.content, []
    old = b""
    if existed:
        if not real.is_file():
            return ToolResult.error(f"{shown} exists and is not a regular file; write_file only writes files")
        if not session.was_read(real):
            return ToolResult.error(f"{shown} already exists and this session has not read it. Call "
                                    f"read_file(path={shown!r}) first, then write it (or use edit_file for a partial change).")
        try:
            stale = session.changed_since_seen(real)
            old = read_beneath(*anchor(real, root))
        except OSError as exc:
            return ToolResult.error(f"Cannot read {shown} before overwriting it: {exc.strerror or exc}")
        if stale:
            return ToolResult.error(f"{shown} changed on disk since you last read it. Call read_file(path={shown!r}) "
                                    "again and redo your change on its current content.")
    gutted = gutting(old, content)
    if gutted:
        return ToolResult.error(gutted)
    bom, codec = _bom(old)
    # Keep the file's conventions: read_file showed its lines without \r and without the BOM.
    old_text = old[len(bom):].decode(codec, "replace")
    if old_text.count("\r\n") and old_text.count("\r\n") == old_text.count("\n") and "\r" not in content:
        content = content.replace("\n", "\r\n")
        notes.append("kept CRLF line endings")
    try:
        data = content.encode(codec)
    except UnicodeEncodeError as exc:
        return ToolResult.error(f"content has a character that cannot be stored as {codec} at index {exc.start} "
                                f"({content[exc.start:exc.end]!r}); nothing was written")
    if bom and not content.startswith("\ufeff"):
        data = bom + data
        notes.append("kept the UTF-8 byte-order mark" if codec == "utf-8" else f"kept {codec.upper()} encoding")
    refusal = approval_refusal(ctx, "edit", shown, preview=preview_diff(old_text, args.content, shown))
    if refusal is not None:
        return ToolResult.error(refusal)
    try:
        session.snapshot(real)
        # mode None: an existing file keeps its permission bits, a new one gets 0o666 less the umask
        write_workspace_file(real, data, root, make_parents=True)
    except OSError as exc:
        return ToolResult.error(f"Could not write {shown}: {exc.strerror or exc}; nothing was changed")
    session.record_write(real, data)
    line_count = args.content.count("\n") + (1 if args.content and not args.content.endswith("\n") else 0)
    verb = "Overwrote" if existed else "Created"
    old_lines = old_text.count("\n") + (1 if old_text and not old_text.endswith("\n") else 0)
    was = f"; it had {plural(old_lines, 'line')}" if existed else ""
    extra = f" ({', '.join(notes)})" if notes else ""
    return ToolResult(ok=True, output=f"{verb} {shown}: {plural(line_count, 'line')}, {plural(len(data), 'byte')}{was}.{extra}",
                      files_changed=[shown], meta={"created": not existed, "bytes": len(data), "lines": line_count})


LIST_DIR = Tool(
    spec=ToolSpec(
        name="list_dir",
        description="Show a directory tree (directories first, marked '/', with file sizes). "
                    "Skips .gitignore'd files and build/cache dirs.",
        args=ListDirArgs, annotations=ToolAnnotations(read_only=True, idempotent=True)),
    execute=_list_dir,
)

READ_FILE = Tool(
    spec=ToolSpec(
        name="read_file",
        description="Read a text file. Each line is shown as '<line number><TAB><line exactly as in the file>'. "
                    "Use offset and limit to page through long files.",
        args=ReadFileArgs, annotations=ToolAnnotations(read_only=True, idempotent=True)),
    execute=_read_file,
)

WRITE_FILE = Tool(
    spec=ToolSpec(
        name="write_file",
        description="Create a file, or replace a whole file with new content (read it first). "
                    "Parent directories are created. Prefer edit_file for changing part of a file.",
        args=WriteFileArgs, annotations=ToolAnnotations(read_only=False, destructive=False)),
    execute=_write_file,
)
