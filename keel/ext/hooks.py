"""Command hooks: programs the user configures to run at fixed points of a session.

Points: PreToolUse, PostToolUse (``matcher``: a regular expression on the tool name),
UserPromptSubmit, Stop, SessionStart, PreCompact. Each hook is a real process (``sh -c``) in the
workspace, started through keel's runner (keel.policy.runner) like a command: in the OS sandbox
with the scrubbed environment and limits, unless the *user's* config marks it ``sandbox = false``
(a project's cannot). Such a hook still runs sandboxed when this session wrote a file its command
line runs (keel.ext.hookfiles: the script, the Makefile, the interpreter) and no person said it
may run outside. A sandboxed hook can read its own session's transcript. It is given the event as
one JSON object on stdin — Claude Code's shape, so its hook scripts
work unchanged. What it says back:

- exit 0: fine. A JSON object on stdout may decide: ``{"decision": "block", "reason": …}``, or for
  PreToolUse ``{"hookSpecificOutput": {"permissionDecision": "deny"|"ask"|"allow", …}}``, and
  ``additionalContext`` text for the model. Plain stdout of UserPromptSubmit, SessionStart and
  PreCompact hooks is context for the model (PreCompact: kept in the compaction record).
- exit 2: block. Its stderr goes to the model (tool refused, completion refused, prompt refused).
- any other exit, a timeout or a crash: the hook failed; the session goes on and the failure is
  logged (a broken hook must not take the run down).

Hooks can only tighten: "allow" from a PreToolUse hook lets the call go on to keel's own approval
gate; it never lifts a refusal. Project hooks (from ``.keel/config.toml``) run only once the user
trusts the project (keel.ext.trust). Every run of a hook is a ``hook`` event in the session log.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.ext.hookfiles import candidates, files_run_by, fingerprints, written_among
from keel.policy.runner import Job, run
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import Tool, ToolContext, ToolResult

HOOK_EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "PreCompact")
BLOCK_EXIT = 2
OUTPUT_CAP = 10_000       # characters of a hook's stdout/stderr kept for the model
HOOK_OUTPUT_BYTES = 1_000_000   # what is read of its output (a JSON answer must arrive whole)
MAX_STOP_BLOCKS = 5       # a Stop hook that keeps refusing cannot hold the run forever


@dataclass(frozen=True)
class HookSpec:
    event: str
    command: str
    matcher: str = ""
    timeout_s: float = 60.0
    source: str = "user"       # "user" or "project"
    sandbox: bool = True       # False: outside the OS sandbox (user config only)

    def matches(self, tool_name: str) -> bool:
        if self.matcher in ("", "*"):
            return True
        try:
            return re.fullmatch(self.matcher, tool_name) is not None
        except re.error:
            return self.matcher == tool_name


@dataclass
class HookVerdict:
    """What the hooks of one event said, merged: any block wins; contexts accumulate."""

    blocked: bool = False
    reason: str = ""
    ask: bool = False
    context: list[str] = field(default_factory=list)

    def merge(self, other: HookVerdict) -> None:
        if other.blocked and not self.blocked:
            self.blocked, self.reason = True, other.reason
        self.ask = self.ask or other.ask
        if other.ask and not self.reason:
            self.reason = other.reason
        self.context.extend(other.context)


def judge_output(event: str, code: int | None, stdout: str, stderr: str) -> tuple[HookVerdict, str]:
    """A hook's exit code and output as a verdict, plus the outcome word for the log. Pure."""
    if code == BLOCK_EXIT:
        reason = stderr.strip()[:OUTPUT_CAP] or "blocked by a hook (exit 2, no message)"
        return HookVerdict(blocked=True, reason=reason), "block"
    if code != 0:
        return HookVerdict(), "error"
    text = stdout.strip()
    data: Any = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, dict):
        context = [text[:OUTPUT_CAP]] if text and event in ("UserPromptSubmit", "SessionStart", "PreCompact") else []
        return HookVerdict(context=context), "ok"
    raw_specific = data.get("hookSpecificOutput")
    specific: dict[str, Any] = raw_specific if isinstance(raw_specific, dict) else {}
    verdict = HookVerdict()
    extra = specific.get("additionalContext") or data.get("additionalContext")
    if isinstance(extra, str) and extra.strip():
        verdict.context.append(extra.strip()[:OUTPUT_CAP])
    permission = specific.get("permissionDecision")
    reason = str(specific.get("permissionDecisionReason") or data.get("reason") or "").strip()[:OUTPUT_CAP]
    decision = data.get("decision")
    if permission == "deny" or decision in ("block", "deny"):
        verdict.blocked, verdict.reason = True, reason or "blocked by a hook"
        return verdict, "block"
    if permission == "ask":
        verdict.ask, verdict.reason = True, reason
        return verdict, "ask"
    if data.get("continue") is False:
        verdict.blocked = True
        verdict.reason = str(data.get("stopReason") or reason or "a hook asked to stop")[:OUTPUT_CAP]
        return verdict, "block"
    return verdict, "ok"


class HookRunner:
    """Runs the configured hooks for one session. ``emit`` writes ``hook`` events to the log;
    ``policy`` is the sandbox hooks run in; ``written()`` names the workspace files this session
    wrote (its checkpoint record); ``ask(question)`` is a person's answer, when one can be asked."""

    def __init__(self, hooks: list[HookSpec], workspace: Path, *, session_id: Callable[[], str],
                 transcript: Callable[[], str | None], emit: Callable[..., Any],
                 policy: SandboxPolicy | None = None, written: Callable[[], set[str]] | None = None,
                 ask: Callable[[str], str] | None = None) -> None:
        self.hooks = hooks
        self.workspace = workspace
        self._session_id, self._transcript, self._emit = session_id, transcript, emit
        self.policy, self._written, self._ask = policy, written, ask
        self.stop_blocks = 0
        self._path = os.environ.get("PATH", "")
        # What each outside-the-sandbox hook's files looked like when the session began.
        self._before = {h.command: fingerprints(candidates(h.command, workspace, self._path))
                        for h in hooks if not h.sandbox}
        self._approved: dict[str, dict[Path, tuple[int, int, int]]] = {}   # the files a person's yes saw

    def has(self, event: str) -> bool:
        return any(h.event == event for h in self.hooks)

    def run(self, event: str, payload: dict[str, Any], tool_name: str | None = None) -> HookVerdict:
        verdict = HookVerdict()
        for hook in self.hooks:
            if hook.event != event or (tool_name is not None and not hook.matches(tool_name)):
                continue
            verdict.merge(self._run_one(hook, payload, tool_name))
        return verdict

    def _run_one(self, hook: HookSpec, payload: dict[str, Any], tool_name: str | None) -> HookVerdict:
        transcript = self._transcript()
        body = {"session_id": self._session_id(), "transcript_path": transcript,
                "cwd": str(self.workspace), "hook_event_name": hook.event, **payload}
        sandboxed, note = self._sandboxed(hook)
        job = Job(self.workspace, command=hook.command, policy=self.policy, sandbox=sandboxed,
                  timeout_s=hook.timeout_s, output_cap=HOOK_OUTPUT_BYTES, stderr_apart=True,
                  stdin=json.dumps(body, default=str).encode(),
                  extra_env={"KEEL_PROJECT_DIR": str(self.workspace), "CLAUDE_PROJECT_DIR": str(self.workspace)},
                  read_paths=(transcript,) if transcript else ())
        code: int | None = None
        stdout = stderr = ""
        started = time.perf_counter()
        try:
            ran = run(job)
            code, stdout, stderr = ran.exit_code, ran.output, ran.stderr or ""
            verdict, outcome = judge_output(hook.event, code, stdout, stderr)
            if ran.timed_out:
                outcome = "timeout"
            notes = ran.notes()
        except OSError as exc:
            verdict, outcome, stderr, notes = HookVerdict(), "error", str(exc), []
        self._emit("hook", event=hook.event, command=hook.command[:300], source=hook.source, tool=tool_name,
                   outcome=outcome, exit_code=code, elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
                   reason=verdict.reason[:500] or None, sandboxed=sandboxed, note=note or None,
                   undone=notes or None,
                   stderr=stderr.strip()[-500:] if outcome in ("error", "timeout") else None)
        return verdict

    def _sandboxed(self, hook: HookSpec) -> tuple[bool, str]:
        """Whether ``hook`` runs in the sandbox, and why not as configured. A hook the user runs
        outside it stays inside when this session wrote a file its command line runs, unless a
        person says yes (asked again when those files change after the yes)."""
        if hook.sandbox:
            return True, ""
        files = files_run_by(hook.command, self.workspace, self._path)
        written = self._written() if self._written is not None else set()
        touched = written_among(files, self.workspace, written, self._before.get(hook.command, {}))
        if not touched:
            return False, ""
        shown = ", ".join(touched[:4])
        now = fingerprints(files)
        if self._approved.get(hook.command) == now:      # a person said yes to exactly these files
            return False, f"run outside the sandbox after a person's yes (this session wrote {shown})"
        if self._ask is not None:
            answer = self._ask(f"The hook `{hook.command}` runs outside the sandbox, but this session wrote "
                               f"{shown}, which it runs.\n  [y] run it outside the sandbox   [n] run it sandboxed")
            if str(answer).strip().lower() in ("y", "yes"):
                self._approved[hook.command] = now
                return False, f"run outside the sandbox after a person's yes (this session wrote {shown})"
        return True, f"run in the sandbox: this session wrote {shown}, which it runs, and no person approved"

    # -- the points the loop calls -------------------------------------------------------------

    def on_stop(self, text: str) -> str | None:
        """Runner callback: the pushback text when a Stop hook refuses to let the run complete."""
        if not self.has("Stop") or self.stop_blocks >= MAX_STOP_BLOCKS:
            return None
        verdict = self.run("Stop", {"stop_hook_active": self.stop_blocks > 0, "last_message": text[:4000]})
        if not verdict.blocked:
            return None
        self.stop_blocks += 1
        return (f"A Stop hook did not accept finishing yet: {verdict.reason}\n"
                "Address it, verify again, then finish.")

    def pre_compact(self, trigger: str, instructions: str = "") -> list[str]:
        """For the context compactor: run PreCompact hooks before compacting. Returns extra
        instructions (the hooks' output) to honour in the summary."""
        verdict = self.run("PreCompact", {"trigger": trigger, "custom_instructions": instructions})
        return verdict.context

    def wrap(self, tool: Tool) -> Tool:
        """The tool with its PreToolUse and PostToolUse hooks around the executor."""
        name = tool.spec.name
        pre = [h for h in self.hooks if h.event == "PreToolUse" and h.matches(name)]
        post = [h for h in self.hooks if h.event == "PostToolUse" and h.matches(name)]
        if not pre and not post:
            return tool
        inner = tool.execute

        def execute(args: Any, ctx: ToolContext) -> ToolResult:
            tool_input = args.model_dump() if hasattr(args, "model_dump") else {}
            if pre:
                verdict = self.run("PreToolUse", {"tool_name": name, "tool_input": tool_input}, name)
                refusal = _refusal(name, verdict, ctx)
                if refusal is not None:
                    return ToolResult.error(refusal, hook="PreToolUse")
            result = inner(args, ctx)
            if post:
                verdict = self.run("PostToolUse", {"tool_name": name, "tool_input": tool_input,
                                                   "tool_response": {"ok": result.ok, "output": result.output}}, name)
                notes = ([f"PostToolUse hook: {verdict.reason}"] if verdict.blocked else []) + verdict.context
                if notes:
                    result.output = result.output + "\n\n" + "\n".join(notes)
            return result

        return dataclasses.replace(tool, execute=execute)


def _refusal(name: str, verdict: HookVerdict, ctx: ToolContext) -> str | None:
    if verdict.blocked:
        return f"Blocked by a PreToolUse hook: {verdict.reason}\nDo not retry this call as it is."
    if verdict.ask:
        prompt = getattr(ctx.approval, "prompt", None)
        if prompt is None or getattr(ctx.approval, "mode", "unattended") == "unattended":
            return (f"Refused: a PreToolUse hook asks for approval of this {name} call"
                    f"{' (' + verdict.reason + ')' if verdict.reason else ''} and no one is present.")
        try:
            answer = str(prompt(f"A hook asks before this {name} call: {verdict.reason}\n  [y] yes   [n] no"))
        except EOFError:   # an interrupt stops the run, as at any approval (keel.policy.approval)
            answer = "n"
        if answer.strip().lower() not in ("y", "yes"):
            return f"Refused by the user (a PreToolUse hook asked): do not retry this {name} call."
    return None


def specs_from_config(hooks: Any, *, trusted_project: bool) -> list[HookSpec]:
    """The hooks to run from ``config.hooks`` (keel.config.HookSettings); project hooks only when
    the project is trusted (the warning for the rest comes from keel.ext.trust)."""
    return [HookSpec(event, entry.command, entry.matcher, entry.timeout, entry.source,
                     entry.sandbox or entry.source == "project")
            for event in HOOK_EVENTS for entry in getattr(hooks, event, None) or []
            if entry.source != "project" or trusted_project]


def attach_pre_compact(manager: Any, hooks: HookRunner) -> None:
    """Run PreCompact hooks before every compaction of ``manager`` (keel.context.manager), and keep
    what they print (instructions to preserve) in the record the compaction leaves behind."""
    if not hooks.has("PreCompact") or getattr(manager, "_pre_compact_attached", False):
        return
    compact = manager.compact

    def compact_with_hooks(messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        notes = hooks.pre_compact(str(kwargs.get("trigger", "requested")))
        event = compact(messages, *args, **kwargs)
        record = event.get("record") if isinstance(event, dict) else None
        if notes and record:
            for message in messages:
                content = message.get("content")
                if isinstance(content, str) and record in content:
                    message["content"] = content + "\n\nTo keep (from PreCompact hooks):\n" + "\n".join(notes)
                    break
        return event

    manager.compact = compact_with_hooks
    manager._pre_compact_attached = True
