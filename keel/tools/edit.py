"""edit_file: search-and-replace edits that land in exactly one place or not at all.

Matching lives in ``edit_match`` (pure), byte-faithful reading and writing in ``textfile``; this
module validates arguments, enforces the workspace jail, snapshots the file for the session and
writes atomically, then shows the edited region the way read_file numbers lines.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import Field, field_validator, model_validator

from keel.policy.paths import PathJailError, display_path, resolve_in_workspace, workspace_root
from keel.policy.reads import read_refusal, shows
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
from keel.tools.edit_match import EditRequest, MatchResult, edited_ranges, find_edits
from keel.tools.edit_unread import unread_note
from keel.tools.path_hints import directory_hint
from keel.tools.session import FileSession
from keel.tools.textfile import TextFileError, read_text_file, write_workspace_file

MAX_EDIT_BYTES = 10 * 1024 * 1024
SNIPPET_CONTEXT = 3
SNIPPET_MAX_LINES = 40
SNIPPET_MAX_GROUPS = 8

_TIER_NOTES = {
    "exact": "",
    "line_endings": "old_text's CRLF line endings were ignored; the file keeps its own.",
    "reindent": "old_text was indented differently from the file; new_text was re-indented to match the file.",
    "whitespace": "old_text differed from the file in whitespace; the file's indentation was kept.",
    "quotes": "old_text's curly/straight quotes differed from the file; the file's quotes were kept.",
    "elision": "the lines hidden by '...' were kept from the file.",
    "blank_lines": "old_text had one blank line more or fewer than the file; the file's blank lines were kept.",
}


class EditItem(ToolArgs):
    old_text: str = Field(description="Exact existing text to replace (whole lines, as in the file).")
    new_text: str = Field(description="Text that replaces old_text.")
    replace_all: bool = Field(False, description="true: replace every occurrence of old_text.")


class EditFileArgs(ToolArgs):
    path: str = Field(description="File to edit, relative to the workspace root.")
    old_text: str = Field(
        "", description="Exact existing text to replace: whole lines copied from read_file without the "
                        "line numbers, same indentation. Must match exactly one place in the file.")
    new_text: str = Field("", description="Text that replaces old_text, indented like the file.")
    replace_all: bool = Field(False, description="true: replace every occurrence of old_text, not just one.")
    edits: list[EditItem] = Field(
        default_factory=list,
        description='Several changes to this file, applied all together or not at all: '
                    '[{"old_text": "...", "new_text": "..."}, ...]. Use instead of old_text/new_text.')
    line_hint: int = Field(
        0, ge=0, description="Line number where old_text starts (from read_file). Only a cross-check.")

    @field_validator("edits", mode="before")
    @classmethod
    def _edits_from_json_text(cls, value: Any) -> Any:
        # Models sometimes send the list as a JSON string; accept it rather than fail the turn.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("edits must be a list of {old_text, new_text} objects") from None
        return value

    @model_validator(mode="after")
    def _one_form(self) -> EditFileArgs:
        # Presence, not emptiness: a forgotten new_text must not turn into a deletion.
        given = self.model_fields_set
        single = {"old_text", "new_text", "replace_all"} & given
        if "edits" in given and single and self._edits_repeat_single():
            # Small models fill every optional field: an edits list that only restates the
            # top-level edit (or is empty) is unambiguous, so it is the single edit.
            self.edits = []
            given.discard("edits")
        if "edits" in given:
            if single:
                raise ValueError("give either old_text/new_text (with replace_all) or edits, not both")
            if not self.edits:
                raise ValueError("edits is empty; give at least one {old_text, new_text}")
            for n, item in enumerate(self.edits, 1):
                _check_pair(item.old_text, item.new_text, f"edits[{n}]: ")
            return self
        missing = [name for name in ("old_text", "new_text") if name not in given]
        if missing:
            raise ValueError(f"{' and '.join(missing)} required (or give edits); new_text may be \"\" "
                             "to delete old_text")
        _check_pair(self.old_text, self.new_text, "")
        return self

    def _edits_repeat_single(self) -> bool:
        single = (self.old_text, self.new_text, self.replace_all)
        return all((e.old_text, e.new_text, e.replace_all) == single for e in self.edits)

    def requests(self) -> list[EditRequest]:
        if self.edits:
            return [EditRequest(e.old_text, e.new_text, e.replace_all) for e in self.edits]
        return [EditRequest(self.old_text, self.new_text, self.replace_all)]


def _check_pair(old_text: str, new_text: str, where: str) -> None:
    if not old_text:
        raise ValueError(f"{where}old_text is empty; copy the lines to replace from the file "
                         "(to create a file use write_file)")
    if old_text == new_text:
        raise ValueError(f"{where}old_text and new_text are identical, so nothing would change: put only the "
                         "line(s) that are wrong in old_text, and their corrected version in new_text")


def run_edit_file(args: EditFileArgs, ctx: ToolContext) -> ToolResult:
    try:
        real = resolve_in_workspace(ctx.workspace, args.path, for_write=True)
    except PathJailError as e:
        return ToolResult.error(f"edit_file refused: {e}" + directory_hint(ctx, args.path))
    rel = display_path(ctx.workspace, real)
    root = workspace_root(ctx.workspace)
    if not real.exists():
        return ToolResult.error(f"{rel} does not exist. edit_file only changes existing files; "
                                "use write_file to create it (check the path with list_dir or find_files).")
    if not real.is_file():
        return ToolResult.error(f"{rel} is not a regular file; edit_file edits files.")
    if real.stat().st_size > MAX_EDIT_BYTES:
        return ToolResult.error(f"{rel} is larger than {MAX_EDIT_BYTES // 2**20} MB; edit it with run_shell.")
    if not os.access(real, os.W_OK):
        return ToolResult.error(f"{rel} is not writable; nothing was changed.")
    # its near-miss lines and the edited region go to the model: the one read decision first
    if not shows(ctx.approval)(real) and (refusal := read_refusal(ctx.approval, rel, real)) is not None:
        return ToolResult.error(refusal)
    try:
        original, before = read_text_file(real, root)
    except (TextFileError, OSError) as e:
        return ToolResult.error(f"cannot edit {rel}: {getattr(e, 'strerror', None) or e}")

    match = find_edits(original.text, args.requests(), line_hint=args.line_hint or None)
    if not match.ok:
        message = f"edit_file {rel}: {match.error}"
        if isinstance(ctx.session, FileSession) and not ctx.session.was_read(real) \
                and match.already_applied_at is None:
            note, whole = unread_note(rel, original.text, match.closest)
            message += "\n\n" + note
            if whole:  # the model has now seen all of it, as if it had called read_file
                ctx.session.record_read(real, before)
        return ToolResult.error(message, **_match_meta(match))
    edited = original.with_replacements((r.start, r.end, r.text) for r in match.replacements)
    # asked only once the edit is known to apply, so a person never approves an edit that fails;
    # the person sees the change it makes before answering
    refusal = approval_refusal(ctx, "edit", rel, preview=preview_diff(original.text, edited.text, rel))
    if refusal is not None:
        return ToolResult.error(refusal)
    try:
        data = edited.to_bytes()
    except TextFileError as e:
        return ToolResult.error(f"cannot edit {rel}: {e}. Nothing was changed.")
    if data == before:
        return ToolResult.error(f"edit_file {rel}: the edit leaves the file exactly as it is; nothing to do.")

    try:
        if isinstance(ctx.session, FileSession):
            ctx.session.snapshot(real)
        write_workspace_file(real, data, root)
    except OSError as e:
        return ToolResult.error(f"cannot write {rel}: {e.strerror or e}. Nothing was changed.")
    if isinstance(ctx.session, FileSession):
        ctx.session.record_write(real, data)

    output = "\n".join(filter(None, [
        _summary(rel, args, match),
        *(_TIER_NOTES.get(t, "") for t in dict.fromkeys(match.tiers)),
        *match.notes,
        f"Note: {rel} is not valid UTF-8; it was read and written as latin-1." if original.latin1_fallback else "",
        snippet(edited.text, edited_ranges(original.text, match.replacements)),
    ]))
    return ToolResult(ok=True, output=output, files_changed=[rel], meta=_match_meta(match))


def _summary(rel: str, args: EditFileArgs, match: MatchResult) -> str:
    count = len(match.replacements)
    if args.edits:
        what = f"applied {len(args.edits)} edits ({count} replacement{'s' if count != 1 else ''})"
    else:
        what = f"replaced {count} occurrence{'s' if count != 1 else ''}"
    return f"Edited {rel}: {what}, matched by: {match.tier}."


def _match_meta(match: MatchResult) -> dict[str, Any]:
    meta: dict[str, Any] = {"tier": match.tier, "replacements": len(match.replacements)}
    if match.candidates:
        meta["candidates"] = list(match.candidates)
    if match.closest:
        meta["closest"] = list(match.closest)
    if match.already_applied_at is not None:
        meta["already_applied_at"] = match.already_applied_at
    return meta


def snippet(text: str, ranges: list[tuple[int, int]]) -> str:
    """The edited regions with a few lines around them, numbered like read_file: ``{n:>6}\\t{line}``."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    groups: list[list[int]] = []
    for first, last in sorted(ranges):
        lo, hi = max(1, first - SNIPPET_CONTEXT), min(len(lines), last + SNIPPET_CONTEXT)
        if groups and lo <= groups[-1][1] + 1:
            groups[-1][1] = max(groups[-1][1], hi)
        else:
            groups.append([lo, hi])
    out: list[str] = []
    for lo, hi in groups[:SNIPPET_MAX_GROUPS]:
        numbers = list(range(lo, hi + 1))
        if len(numbers) > SNIPPET_MAX_LINES:
            half = SNIPPET_MAX_LINES // 2
            skipped = len(numbers) - 2 * half
            numbers = [*numbers[:half], -skipped, *numbers[-half:]]
        if out:
            out.append("")
        out += [f"{n:>6}\t{lines[n - 1]}" if n > 0 else f"{'':>6}\t... ({-n} lines not shown) ..."
                for n in numbers]
    if len(groups) > SNIPPET_MAX_GROUPS:
        out.append(f"({len(groups) - SNIPPET_MAX_GROUPS} more edited places not shown; read_file shows them)")
    return "\n".join(out)


EDIT_FILE = Tool(
    spec=ToolSpec(
        name="edit_file",
        description=(
            "Replace text in an existing file. old_text must be copied exactly from the file (whole lines, "
            "same indentation, no line numbers) and match one place; add neighbouring lines if it is not "
            "unique. A wrong or ambiguous old_text changes nothing and returns the closest lines. "
            "For several changes to one file pass edits=[...] (all applied or none). "
            "To create a file use write_file."
        ),
        args=EditFileArgs,
        annotations=ToolAnnotations(read_only=False, destructive=False),
    ),
    execute=run_edit_file,
)
