"""The decision record that replaces folded messages: what a fresh reader needs to carry on. Pure.

Facts keel knows for certain (the task, acceptance commands, files modified and their current
content, open todos, the latest check results, every folded step in one line) are written by keel
itself, so they survive a summarising model that omits them or fails. The model adds what only it
can judge: approaches ruled out and why, decisions and findings, unresolved problems, the next step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from keel.context.compaction import EDITS, READS, RECORD_MARKER, STUB_PREFIX, Fold, calls_by_id, is_record

SUMMARY_SECTIONS = ("Approaches ruled out", "Decisions and findings", "Unresolved problems", "Next step")
SUMMARY_INSTRUCTION = (
    "keel is compacting this conversation to fit the model's context window: the messages above will be "
    "replaced by a record. Do not call any tool. Write the part of the record only you can write, under "
    "exactly these headings:\n" + "\n".join(f"## {s}" for s in SUMMARY_SECTIONS) + "\n"
    "Under 'Approaches ruled out' list what was tried and failed and why, so it is not tried again. Be "
    "specific: name files, functions, commands and error messages. Files modified, todos and check results "
    "are recorded by keel; do not repeat them. At most 400 words.")
SUMMARY_TITLE = "## From the summary of the folded messages"
FAILURES_TITLE = "## Attempts that failed (from the folded steps; no model summary was written)"
STEPS_TITLE = "## Folded steps (call → first line of its result)"
READ_TITLE = "## Files read earlier (read_file again if needed)"
SKIPPED = "- … "
ERROR_HINTS = ("error", "failed", "traceback", "not found", "refused", "exit code", "no such", "cannot")
TASK_CHARS = 1500
STEP_LINES = 60


@dataclass(frozen=True)
class Facts:
    """What keel knows for certain, gathered by the caller (task state, config, the disk)."""

    task: str = ""
    acceptance: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()
    todos: tuple[tuple[str, str], ...] = ()            # (content, status)
    checks: tuple[tuple[str, int | None, str], ...] = ()  # (command, exit code, kind), oldest first
    contents: Mapping[str, str | None] = field(default_factory=dict)  # current text; None: gone; absent: unknown


def edited_paths(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Paths the history's write/edit calls named, in first-seen order."""
    seen: list[str] = []
    for call in calls_by_id(messages).values():
        if call.name in EDITS and call.path and call.path not in seen:
            seen.append(call.path)
    return seen


def build_record(messages: Sequence[dict[str, Any]], plan: Fold, facts: Facts, summary: str | None, *,
                 number: int, max_chars: int, file_chars: int) -> str:
    """The record text (at most ``max_chars``); ``file_chars`` bounds the file contents it carries."""
    folded = [messages[i] for i in plan.folded]
    calls = calls_by_id(messages)
    head = (f"{RECORD_MARKER} Compaction {number}: {len(folded)} earlier messages were folded into this record "
            "to fit the context window. It replaces them; the messages after it are verbatim.")
    earlier = next((sections(str(m["content"])) for m in reversed(folded) if is_record(m)), {})
    parts = [head, _task(folded, facts), _files(messages, plan, facts, calls, file_chars, earlier)]
    if summary and summary.strip():
        # its own headings one level down, so the record's sections stay keel's
        demoted = "\n".join("#" + line if line.startswith("#") else line for line in summary.strip().splitlines())
        parts.append(f"{SUMMARY_TITLE}\n{demoted}")
    else:  # keel's own account, plus what an earlier record's summary said
        if earlier.get(SUMMARY_TITLE):
            parts.append(f"{SUMMARY_TITLE} (at an earlier compaction)\n{_clip(earlier[SUMMARY_TITLE], max_chars // 4)}")
        parts.append(_failures(folded, calls, earlier.get(FAILURES_TITLE, "")))
    parts += [_todos(facts), _verification(facts)]
    carried = [line for line in earlier.get(STEPS_TITLE, "").splitlines() if line.startswith("- ")]
    skipped = sum(int(w) for line in carried if line.startswith(SKIPPED) for w in line.split() if w.isdigit())
    steps = [line for line in carried if not line.startswith(SKIPPED)] + _steps(folded, calls)
    text = "\n\n".join(p for p in parts if p)
    room = max_chars - len(text) - 40
    if steps and room > 200:
        text += "\n\n" + _clip_lines(steps, room, skipped)
    return _clip(text, max_chars)


def sections(record: str) -> dict[str, str]:
    """A record's sections: heading line → body (the text up to the next heading)."""
    out: dict[str, str] = {}
    title, body = "", list[str]()
    for line in record.splitlines():
        if line.startswith("## "):
            if title:
                out[title] = "\n".join(body).strip()
            title, body = line.split(" (", 1)[0] if line.startswith(SUMMARY_TITLE) else line, []
        else:
            body.append(line)
    if title:
        out[title] = "\n".join(body).strip()
    return out


def _task(folded: Sequence[dict[str, Any]], facts: Facts) -> str:
    lines = ["## Task", _clip(facts.task.strip(), TASK_CHARS) or "(the first user message above)"]
    follow_ups = [str(m.get("content") or "").strip() for m in folded
                  if m.get("role") == "user" and not is_record(m)]
    lines += [f"- later request: {_clip(t, 500)}" for t in follow_ups if t]
    lines.append("## Acceptance")
    if facts.acceptance:
        lines += [f"- `{cmd}` must pass" for cmd in facts.acceptance]
    else:
        lines.append("- the task's own words; keel's verification gate runs the project's checks before finishing")
    return "\n".join(lines)


def _files(messages: Sequence[dict[str, Any]], plan: Fold, facts: Facts, calls: Mapping[str, Any],
           file_chars: int, earlier: Mapping[str, str]) -> str:
    changed = list(dict.fromkeys([*facts.files_changed, *edited_paths(messages)]))
    shown_below = {calls[cid].path for i in range(plan.fold_end, len(messages))
                   if messages[i].get("role") == "tool" and i not in plan.stubbed and i not in plan.cut
                   and (cid := str(messages[i].get("tool_call_id"))) in calls and calls[cid].name in READS}
    lines = ["## Files modified"] if changed else ["## Files modified", "- none yet"]
    budget = file_chars
    for path in reversed(changed):  # most recently changed first gets the content budget
        text = facts.contents.get(path)
        if path in shown_below:
            lines.append(f"- {path} — its latest read is below")
        elif path not in facts.contents:
            lines.append(f"- {path} — read_file it for the current content")
        elif text is None:
            lines.append(f"- {path} — not on disk now (deleted, or the write did not happen)")
        elif len(text) + 20 <= budget:
            budget -= len(text) + 20
            lines.append(f"- {path} — current content:\n```\n{text}\n```")
        else:
            lines.append(f"- {path} ({text.count(chr(10)) + 1} lines) — read_file it for the current content")
    read = [calls[str(m.get("tool_call_id"))].path for m in (messages[i] for i in plan.folded)
            if m.get("role") == "tool" and str(m.get("tool_call_id")) in calls
            and calls[str(m.get("tool_call_id"))].name in READS]
    before = [p.strip() for p in earlier.get(READ_TITLE, "").split(",") if p.strip()]
    read = [p for p in dict.fromkeys([*before, *read]) if p and p not in changed and p not in shown_below]
    if read:
        lines.append(READ_TITLE)
        lines.append(", ".join(read))
    return "\n".join(lines)


def _failures(folded: Sequence[dict[str, Any]], calls: Mapping[str, Any], before: str) -> str:
    """Without a model summary: the folded calls whose result reads like a failure."""
    lines = [line for line in before.splitlines() if line.startswith("- ") and "none seen" not in line]
    for m in folded:
        if m.get("role") != "tool":
            continue
        first = _first_line(str(m.get("content") or ""))
        if any(h in first.lower() for h in ERROR_HINTS):
            call = calls.get(str(m.get("tool_call_id")))
            lines.append(f"- {call.short() if call else 'a call'} → {first}")
    body = "\n".join(lines[-20:]) or "- none seen in the folded steps"
    return f"{FAILURES_TITLE}\n{body}"


def _todos(facts: Facts) -> str:
    open_items = [f"- [{status}] {content}" for content, status in facts.todos if status != "done"]
    return "## Open todos\n" + ("\n".join(open_items) if open_items else "- none recorded")


def _verification(facts: Facts) -> str:
    latest: dict[str, tuple[str, int | None]] = {}
    for command, code, kind in facts.checks:
        latest[kind] = (command, code)
    if not latest:
        return "## Verification\n- no checks have run yet"
    rows = [f"- {kind}: `{cmd}` → {'passed' if code == 0 else f'exit {code}'}" for kind, (cmd, code) in latest.items()]
    return "## Verification (latest run of each kind)\n" + "\n".join(rows)


def _steps(folded: Sequence[dict[str, Any]], calls: Mapping[str, Any]) -> list[str]:
    steps = []
    for m in folded:
        if m.get("role") == "tool":
            call = calls.get(str(m.get("tool_call_id")))
            content = str(m.get("content") or "")
            result = "(its output was folded earlier)" if content.startswith(STUB_PREFIX) else _first_line(content)
            steps.append(f"- {call.short(80) if call else 'call'} → {result}")
    return steps


def _clip_lines(lines: list[str], room: int, skipped_before: int = 0) -> str:
    title = STEPS_TITLE
    shown = lines[-STEP_LINES:]
    while shown and len(title) + sum(len(s) + 1 for s in shown) + 60 > room:
        shown = shown[1:]
    skipped = len(lines) - len(shown) + skipped_before
    note = [f"{SKIPPED}{skipped} earlier steps"] if skipped else []
    return "\n".join([title, *note, *shown])


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _clip(line.strip(), 140)
    return "(no output)"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:max(0, limit - 1)] + "…"
