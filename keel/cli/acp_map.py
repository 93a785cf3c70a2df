"""keel's event stream as Agent Client Protocol session updates (``keel acp``, docs/acp.md).

Pure translation, no I/O beyond reading a file the run just changed: ``UpdateSink`` is an event sink
that turns keel's events into ACP updates and hands each to ``post`` in the order they happened.
Tool calls are announced ``pending`` when the model's reply names them, go ``in_progress`` when the
call before them is done (a turn's writing calls run one at a time, in order), and end ``completed``
or ``failed`` with their output; edits end with the file's whole text before and after as a diff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import schema
from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)

from keel.cli.render import seconds
from keel.cli.textcalls import CallTextFilter, recovered_from_text
from keel.loop.runner import INTERRUPTED
from keel.policy.approval import question_parts
from keel.trace.sessions import INTERRUPTED_BY_CRASH

Post = Callable[[Any], None]
# how the runner answers a call an interrupt cut, and how a resume answers one left unanswered
CUT_SHORT = (INTERRUPTED, INTERRUPTED_BY_CRASH)

KINDS: dict[str, Any] = {"read_file": "read", "list_dir": "read", "find_files": "search", "grep": "search",
         "edit_file": "edit", "write_file": "edit", "change_file": "edit", "run_shell": "execute",
         "todo_write": "think", "remember": "think"}
EDITS = ("edit_file", "write_file", "change_file")
# Not tool calls to a person: finish's summary and ask_user's question are what the agent says.
SPOKEN = {"finish": "summary", "ask_user": "question"}
MAX_TEXT = 512_000   # a larger file gets no before/after text (sending it twice would cost more than it shows)
STOP_REASONS = {"limit:steps": "max_turn_requests", "limit:tokens": "max_tokens", "limit:context": "max_tokens"}
ANSWERS = {"allow_once": "y", "allow_always": "a", "reject": "n"}


def stop_reason(keel_reason: str, cancelled: bool) -> str:
    """The ACP StopReason for a keel stop: a cancel the client asked for is always ``cancelled``."""
    if cancelled or keel_reason == "interrupted":
        return "cancelled"
    return STOP_REASONS.get(keel_reason, "end_turn")


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        data = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _short(text: str, n: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def title_for(name: str, args: dict[str, Any]) -> str:
    target = args.get("path") or args.get("pattern") or args.get("command") or ""
    verb = {"read_file": "Read", "list_dir": "List", "find_files": "Find", "grep": "Search",
            "edit_file": "Edit", "write_file": "Write", "change_file": "Change", "run_shell": "Run",
            "todo_write": "Update the plan", "remember": "Remember"}.get(name, name)
    if name == "grep" and args.get("path") and args.get("pattern"):
        target = f"{args['pattern']} in {args['path']}"
    return f"{verb} {_short(target)}".strip() if target and name != "todo_write" else verb


def locations_for(workspace: Path, args: dict[str, Any]) -> list[schema.ToolCallLocation]:
    """The paths a call touches, absolute (ACP wants absolute paths), with a line when one is given."""
    path = args.get("path")
    if not isinstance(path, str) or not path:
        return []
    line = args.get("offset") or args.get("line_hint")
    return [schema.ToolCallLocation(path=str((workspace / path).resolve()),
                                    line=line if isinstance(line, int) and line > 0 else None)]


def read_text(path: Path) -> str | None:
    """The file's text; None when absent, binary, too big or unreadable."""
    try:
        if path.stat().st_size > MAX_TEXT:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return None if b"\0" in data else data.decode("utf-8", "replace")


@dataclass
class Call:
    id: str
    name: str
    args: dict[str, Any]
    status: str = "pending"
    before: str | None = None       # an edit's file text when the call started
    existed: bool = True


@dataclass
class UpdateSink:
    """An event sink: keel events in, ACP session updates out (through ``post``), in order."""

    workspace: Path
    post: Post
    calls: dict[str, Call] = field(default_factory=dict)
    turn: list[str] = field(default_factory=list)    # this reply's calls, in order
    text: CallTextFilter = field(default_factory=CallTextFilter)
    gate_runs: int = 0
    checks_call: str | None = None                    # the gate's checks running now, as a tool call

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(event)

    def say(self, text: str) -> None:
        if text:
            self.post(update_agent_message_text(text))

    def _on_assistant_delta(self, event: dict[str, Any]) -> None:
        if event["kind"] == "content":
            self.say(self.text.feed(event["text"]))
        elif event["kind"] == "reasoning" and event["text"]:
            self.post(update_agent_thought_text(event["text"]))
        elif event["kind"] == "retry":   # the attempt shown so far was dropped: say so, it cannot be unsent
            self.text.reset()
            self.post(update_agent_thought_text(f"\n[retry] {event['text']}\n"))

    def _on_model_call(self, event: dict[str, Any]) -> None:
        self.say(self.text.end(recovered_from_text(event), str(event.get("content") or "")))
        self.turn = []
        for raw in (event.get("replay") or {}).get("calls") or []:
            call = Call(f"{event['step']}-{raw['id']}", raw["name"], _args(raw.get("arguments")))
            self.calls[call.id] = call
            self.turn.append(call.id)
            if call.name in SPOKEN:
                continue
            self.post(start_tool_call(call.id, title_for(call.name, call.args), kind=KINDS.get(call.name, "other"),
                                      status="pending", locations=locations_for(self.workspace, call.args),
                                      raw_input=call.args))
        self._advance()

    def _advance(self) -> None:
        """The next call of the turn that has not started is the one running now."""
        call = next((self.calls[i] for i in self.turn if self.calls[i].status == "pending"), None)
        if call is None:
            return
        call.status = "in_progress"
        if call.name in EDITS and isinstance(call.args.get("path"), str):
            path = self.workspace / call.args["path"]
            call.existed = path.exists()
            call.before = read_text(path)
        if call.name not in SPOKEN:
            self.post(update_tool_call(call.id, status="in_progress"))

    def _on_tool_call(self, event: dict[str, Any]) -> None:
        call = self.calls.get(f"{event['step']}-{event['call_id']}")
        if call is None:
            return
        call.status = "completed" if event["ok"] else "failed"
        if call.name in SPOKEN:
            if event["ok"] or event.get("repeat"):
                self.say(f"\n\n{call.args.get(SPOKEN[call.name], '')}\n")
        else:
            status: Any = call.status
            self.post(update_tool_call(call.id, status=status, content=self._content(call, event),
                                       raw_output={"ok": event["ok"], "output": event.get("result_preview", ""),
                                                   "files_changed": event.get("files_changed") or []}))
            if call.name == "todo_write" and event["ok"]:
                self._plan(call.args.get("todos"))
        self._advance()

    def _content(self, call: Call, event: dict[str, Any]) -> list[Any]:
        if call.name in EDITS and event["ok"] and isinstance(call.args.get("path"), str):
            path = (self.workspace / call.args["path"]).resolve()
            after = read_text(path)
            if after is not None and (call.before is not None or not call.existed):
                return [tool_diff_content(str(path), after, call.before if call.existed else None)]
        preview = str(event.get("result_preview") or "")
        more = event.get("output_bytes", 0) > len(preview.encode("utf-8", "replace"))
        body = f"```\n{preview}{' …' if more else ''}\n```" if call.name == "run_shell" else preview
        return [tool_content(text_block(body))] if body else []

    def _plan(self, todos: Any) -> None:
        status = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}
        entries = [plan_entry(str(t.get("content", "")), status=status.get(t.get("status"), "pending"))  # type: ignore[arg-type]
                   for t in todos or [] if isinstance(t, dict)]
        self.post(update_plan(entries))

    def _on_checks_start(self, event: dict[str, Any]) -> None:
        """The gate's checks as a tool call of their own, in progress while they run (the baseline
        before the first change, or a completion claim's), so no edit or command looks slow."""
        self.gate_runs += 1
        baseline = event.get("phase") == "baseline"
        self.checks_call = f"{'baseline' if baseline else 'verify'}-{event.get('step', 0)}-{self.gate_runs}"
        commands = "\n".join(f"- `{c}`" for c in event.get("commands") or [])
        self.post(start_tool_call(self.checks_call, "Baseline checks" if baseline else "Verify", kind="execute",
                                  status="in_progress", content=[tool_content(text_block(commands))] if commands else None,
                                  raw_input={"phase": event.get("phase"), "commands": event.get("commands")}))

    def _on_checks_before(self, event: dict[str, Any]) -> None:
        results = event.get("results") or []
        failing = sum(1 for c in results if not c.get("passed"))
        title = f"Baseline checks: {failing} failing before any change" if failing else "Baseline checks: passing"
        text = verification_text({"checks": results}, verdict=False) + _took(event)
        self._end_checks(title, "completed", text, {"checks": results, "elapsed_s": event.get("elapsed_s")})

    def _on_verification(self, event: dict[str, Any]) -> None:
        """Each gate run's verdict and the checks it ran."""
        verdict = event.get("problem") or event.get("status", "")
        self._end_checks(f"Verify: {verdict}", "failed" if event.get("status") == "failed" else "completed",
                         verification_text(event) + _took(event),
                         {k: event.get(k) for k in ("status", "problem", "checks", "elapsed_s")})

    def _end_checks(self, title: str, status: Any, text: str, raw: dict[str, Any]) -> None:
        content = [tool_content(text_block(text))]
        if self.checks_call is None:   # no start was seen (the first message's checks): one call, done
            self.gate_runs += 1
            self.post(start_tool_call(f"verify-{self.gate_runs}", title, kind="execute", status=status,
                                      content=content, raw_output=raw))
            return
        self.post(update_tool_call(self.checks_call, title=title, status=status, content=content, raw_output=raw))
        self.checks_call = None

    def _on_compaction(self, event: dict[str, Any]) -> None:
        self.post(update_agent_thought_text(f"\n[context compacted: {event.get('trigger', '')}]\n"))

    def _on_decision(self, event: dict[str, Any]) -> None:
        if event.get("pushback_kind"):   # keel told the model it is not done: the person may want to know why
            self.post(update_agent_thought_text(f"\n[keel pushback: {event['pushback_kind']}]\n"))

    def _on_stop(self, _event: dict[str, Any]) -> None:
        self.say(self.text.end(False, ""))
        for call in self.calls.values():   # calls an interrupt left unanswered never ran to an end
            if call.status in ("pending", "in_progress"):
                call.status = "failed"
                if call.name not in SPOKEN:
                    self.post(update_tool_call(call.id, status="failed"))
        self.turn = []

    def running_call(self, question: str) -> Call | None:
        """The call an approval question is about: the started one whose path or command it names,
        else the first started one (read-only calls may run together)."""
        started = [self.calls[i] for i in self.turn if self.calls[i].status == "in_progress"]
        for call in started:
            target = call.args.get("path") or call.args.get("command")
            if isinstance(target, str) and target and target.strip() in question:
                return call
        return started[0] if started else None


def _took(event: dict[str, Any]) -> str:
    return f"\n\ntook {s}" if (s := seconds(event)) else ""


def verification_text(event: dict[str, Any], verdict: bool = True) -> str:
    lines = []
    before = set(event.get("preexisting_failures") or ())
    for c in event.get("checks") or []:
        mark = "passed" if c.get("passed") else ("refused" if c.get("refused") else f"failed (exit {c.get('exit_code')})")
        if not c.get("passed") and c.get("command") in before:
            mark += ", failing before this run"
        lines.append(f"- `{c.get('command')}`: {mark}")
    text = "\n".join(lines or ["no checks ran"])
    return text + f"\n\nverdict: {event.get('problem') or event.get('status', '')}" if verdict else text


def verdict_message(result: Any) -> str:
    """The closing line: how the run stopped, the gate's last verdict, and what changed."""
    parts = [f"keel: {result.status}" + ("" if result.stop_reason == result.status else f" ({result.stop_reason})")]
    v = result.verification
    if isinstance(v, dict):
        checks = v.get("checks") or []
        ran = ", ".join(f"`{c.get('command')}` {'✓' if c.get('passed') else '✗'}" for c in checks)
        parts.append(f"verification {v.get('status')}" + (f": {ran}" if ran else ""))
    changes = result.changes if isinstance(result.changes, dict) else {}
    if changes.get("diffstat"):
        parts.append(f"changes: {changes['diffstat']}")
    if result.error:
        parts.append(f"error: {result.error}")
    return "\n\n---\n" + " · ".join(parts) + "\n"


def permission_request(question: str, call: Call | None, workspace: Path,
                       fallback_id: str) -> tuple[schema.ToolCallUpdate, list[schema.PermissionOption]]:
    """An Approver question (keel.policy.approval) as the tool call it is about and the three answers."""
    head, preview, answers = question_parts(question)
    lines = head.splitlines() or [question]
    always = re.search(r"\[a\] always allow (.+?) this session", answers)
    why = " ".join(line.strip() for line in lines[1:])
    if call is not None:
        content: list[Any] = [tool_content(text_block(f"{lines[0]}\n{why}".strip()))]
        if (proposed := proposed_diff(call, workspace)) is not None:
            content.append(proposed)
        elif preview:   # the edit's own diff, when the whole new text is not plain to see from the call
            content.append(tool_content(text_block(f"```diff\n{preview}\n```")))
        tool = schema.ToolCallUpdate(tool_call_id=call.id, title=title_for(call.name, call.args),
                                     kind=KINDS.get(call.name, "other"), status="pending",
                                     locations=locations_for(workspace, call.args) or None,
                                     content=content, raw_input=call.args)
    else:
        tool = schema.ToolCallUpdate(tool_call_id=fallback_id, title=_short(lines[0] if lines else question, 100),
                                     kind="other", status="pending",
                                     content=[tool_content(text_block(head or question))])
    options = [schema.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
               schema.PermissionOption(option_id="allow_always",
                                       name=f"Always allow {always.group(1)} this session" if always else "Always allow",
                                       kind="allow_always"),
               schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once")]
    return tool, options


def proposed_diff(call: Call, workspace: Path) -> Any:
    """What an edit asking for approval would make of the file, when that is plain to see: the
    whole new text of a write_file, or an edit_file whose old text occurs exactly once."""
    path = call.args.get("path")
    if call.name not in ("edit_file", "write_file") or not isinstance(path, str):
        return None
    real = (workspace / path).resolve()
    before = read_text(real) if real.exists() else None
    if call.name == "write_file" and isinstance(call.args.get("content"), str):
        return tool_diff_content(str(real), call.args["content"], before)
    old, new = call.args.get("old_text"), call.args.get("new_text", "")
    if before is None or not isinstance(old, str) or not old or not isinstance(new, str) or before.count(old) != 1:
        return None
    return tool_diff_content(str(real), before.replace(old, new), before)


def answer_for(response: Any) -> str:
    """The Approver's answer letter for the client's choice; a cancelled request is a refusal."""
    outcome = getattr(response, "outcome", None)
    if getattr(outcome, "outcome", None) == "selected":
        return ANSWERS.get(getattr(outcome, "option_id", ""), "n")
    return "n"


def prompt_text(blocks: list[Any]) -> str:
    """A prompt's content blocks as the task text: text as is, embedded files as fenced context."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            res = block.resource
            body = getattr(res, "text", None)
            if body is not None:
                parts.append(f"Context from {res.uri}:\n```\n{body}\n```")
        elif kind == "resource_link":
            parts.append(f"(see {block.uri})")
    return "\n\n".join(p for p in parts if p).strip()


def replay_history(messages: list[dict[str, Any]], task: str, workspace: Path, post: Post,
                   outcomes: dict[str, bool] | None = None) -> None:
    """A saved conversation as the updates that would have shown it (session/load replays it).
    ``outcomes``: call id -> whether it succeeded, from the session's tool_call events; a call with
    none (an interrupt answered it) is failed when its answer says it was interrupted."""
    outcomes = outcomes or {}
    first, spoken = True, set()
    for msg in messages:
        role, content = msg.get("role"), msg.get("content")
        if role == "user":
            post(update_user_message_text(task if first and task else str(content or "")))
            first = False
        elif role == "assistant":
            if isinstance(content, str) and content.strip():
                post(update_agent_message_text(content))
            for c in msg.get("tool_calls") or []:
                fn = c.get("function") or {}
                args = _args(fn.get("arguments"))
                if fn.get("name") in SPOKEN:
                    spoken.add(c.get("id"))
                    post(update_agent_message_text(str(args.get(SPOKEN[fn["name"]], ""))))
                    continue
                post(start_tool_call(f"h-{c.get('id')}", title_for(fn.get("name", ""), args),
                                     kind=KINDS.get(fn.get("name", ""), "other"), status="completed",
                                     locations=locations_for(workspace, args), raw_input=args))
        elif role == "tool" and isinstance(content, str) and msg.get("tool_call_id") not in spoken:
            call_id = str(msg.get("tool_call_id"))
            ok = outcomes.get(call_id, not content.startswith(CUT_SHORT))
            post(update_tool_call(f"h-{call_id}", status="completed" if ok else "failed",
                                  content=[tool_content(text_block(_short(content, 2000)))]))


def call_outcomes(events: list[dict[str, Any]]) -> dict[str, bool]:
    """call id -> ok, from a session's tool_call events (the last word on each id)."""
    return {str(e.get("call_id")): bool(e.get("ok")) for e in events if e.get("type") == "tool_call"}
