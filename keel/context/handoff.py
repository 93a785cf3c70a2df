"""The handoff note: when a run stops at a limit, what the next session (or person) needs to carry on.

Written into the session directory as ``handoff.md`` on every ``limit:*`` stop, and named in the
result JSON (``handoff``). Built from facts only, without a model call (the limit may be the token
budget or a dead engine): the goal, what is done (files changed, checks that passed), what is left
(open todos, failing checks, changes no check has seen), the last activity, and a next step chosen
by fixed rules from those facts.

``render_handoff`` is pure; ``write_handoff`` does the I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.core.state import CheckEvidence, TaskState, Todo
from keel.outputs.failure_parsers.common import clip
from keel.outputs.summarize import summarize_failure

HANDOFF_FILE = "handoff.md"
_LIMIT_WORDS = {"steps": "step limit", "wall_clock": "wall-clock limit", "tokens": "token budget",
                "cost": "cost budget", "repetition": "repetition limit (the same call kept giving the same result)",
                "no_progress": "no-progress limit", "retries": "engine retry limit",
                "context": "context window limit", "verification": "verification repair limit"}
_PREVIEW = 200
_LAST_CALLS = 4
_FAILURE_LINES = 6


@dataclass(frozen=True)
class HandoffFacts:
    task: str
    stop_reason: str
    steps: int
    session_id: str
    files_changed: tuple[str, ...]
    checks: tuple[CheckEvidence, ...]
    last_change_seq: int
    todos: tuple[Todo, ...]
    verification: dict[str, Any] | None
    last_said: str                      # the model's last words
    last_calls: tuple[str, ...]         # "run_shell `pytest -q` → exit code: 1"
    shell_results: dict[str, str] = field(default_factory=dict)   # command → what its last run showed


def facts_from(task: str, stop_reason: str, steps: int, session_id: str, state: TaskState,
               verification: dict[str, Any] | None, messages: Sequence[dict[str, Any]]) -> HandoffFacts:
    return HandoffFacts(task=task or state.task, stop_reason=stop_reason, steps=steps, session_id=session_id,
                        files_changed=tuple(state.files_changed), checks=tuple(state.checks),
                        last_change_seq=state.last_change_seq, todos=tuple(state.todos),
                        verification=verification, last_said=_last_said(messages),
                        last_calls=tuple(_last_calls(messages)), shell_results=_shell_results(messages))


def render_handoff(f: HandoffFacts) -> str:
    done, left = _done(f), _left(f)
    title = _one_line(f.task)[:80] or "(no task text)"
    kind = f.stop_reason.removeprefix("limit:")
    lines = [f"# Handoff: {title}", "",
             f"Stopped at the {_LIMIT_WORDS.get(kind, kind + ' limit')} (`{f.stop_reason}`) after {f.steps} "
             f"steps, before the task was done. Session `{f.session_id}`.", "",
             "## Goal", "", f.task.strip() or "(no task text)", "",
             "## Done", "", *(done or ["- Nothing yet: no file was changed and no check passed."]), "",
             "## Left", "", *(left or ["- Nothing recorded as open; check the goal against the changes."]), ""]
    if f.last_said or f.last_calls:
        lines += ["## Last activity", ""]
        if f.last_said:
            lines.append(f"- The model last said: {f.last_said}")
        lines += [f"- {call}" for call in f.last_calls]
        lines.append("")
    lines += ["## Next step", "", next_step(f), "",
              f"To carry on: `keel run --resume {f.session_id}` (with a higher limit), or a new session "
              "given this note as its task.", ""]
    return "\n".join(lines)


def next_step(f: HandoffFacts) -> str:
    """One concrete next action, by fixed priority: a failing check, the todo in progress, changes no
    check has seen, the next pending todo, else start or verify."""
    failing = _failing_checks(f)
    if failing:
        c = failing[0]
        return f"Make `{c.command}` pass (its latest run exited {c.exit_code}), then rerun it."
    gate = _gate_failures(f)
    if gate:
        return f"Fix what the verification gate reported for `{gate[0]}`, then rerun it."
    doing = [t for t in f.todos if t.status == "in_progress"]
    if doing:
        return f"Continue the todo in progress: {doing[0].content}"
    if f.files_changed and not _fresh_pass(f):
        return "Run the project's checks on the changed files (" + ", ".join(f.files_changed[:5]) + ")."
    pending = [t for t in f.todos if t.status == "pending"]
    if pending:
        return f"Start the next todo: {pending[0].content}"
    if not f.files_changed:
        return "Start on the goal: find the code it concerns and make the first change."
    return "Review the changes against the goal, run the checks, and finish."


def write_handoff(session_dir: Path, facts: HandoffFacts) -> Path | None:
    """Write the note; returns its path, or None when the directory cannot be written (the run's
    result is still reported: a missing note must not turn a limit stop into a crash)."""
    path = session_dir / HANDOFF_FILE
    try:
        session_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(render_handoff(facts), encoding="utf-8")
    except OSError:
        return None
    return path


# -- sections --------------------------------------------------------------------------------------
def _done(f: HandoffFacts) -> list[str]:
    out = []
    if f.files_changed:
        out.append("- Files changed: " + ", ".join(f.files_changed))
    passed = [c for c in _latest_per_command(f.checks) if c.passed]
    for c in passed:
        when = "after the last change" if c.seq > f.last_change_seq else "before the last change"
        out.append(f"- Check passed ({c.kind}, {when}): `{c.command}`")
    out += [f"- [x] {t.content}" for t in f.todos if t.status == "done"]
    return out


def _left(f: HandoffFacts) -> list[str]:
    out = [f"- [{'~' if t.status == 'in_progress' else ' '}] {t.content}" for t in f.todos if t.status != "done"]
    for c in _failing_checks(f):
        out.append(f"- Failing check ({c.kind}): `{c.command}` exited {c.exit_code}")
        out += ["  " + line for line in _failure_lines(c, f.shell_results.get(c.command, ""))]
    out += [f"- Verification gate: `{cmd}` failed" for cmd in _gate_failures(f)]
    if f.files_changed and not _fresh_pass(f):
        out.append("- No check has passed since the last change.")
    return out


def _latest_per_command(checks: Sequence[CheckEvidence]) -> list[CheckEvidence]:
    latest: dict[str, CheckEvidence] = {}
    for c in checks:
        latest[c.command] = c
    return list(latest.values())


def _failing_checks(f: HandoffFacts) -> list[CheckEvidence]:
    return [c for c in _latest_per_command(f.checks) if not c.passed]


def _fresh_pass(f: HandoffFacts) -> bool:
    return any(c.passed and c.seq > f.last_change_seq for c in f.checks)


def _gate_failures(f: HandoffFacts) -> list[str]:
    checks = (f.verification or {}).get("checks") or []
    return [str(c.get("command")) for c in checks if isinstance(c, dict) and c.get("passed") is False]


def _failure_lines(check: CheckEvidence, shown: str) -> list[str]:
    """What the failing run showed, summarised by the verification gate's summariser."""
    if not shown:
        return []
    body = shown.split("\n", 1)[1] if shown.startswith("exit code") and "\n" in shown else shown
    summary = summarize_failure(check.command, body, check.exit_code, max_lines=_FAILURE_LINES)
    return [clip(line) for line in summary.text().split("\n")]


def _shell_results(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    out: dict[str, str] = {}
    for m in messages:
        for c in m.get("tool_calls") or () if m.get("role") == "assistant" else ():
            fn = c.get("function") or {}
            if fn.get("name") != "run_shell" or not isinstance(results.get(c.get("id")), str):
                continue
            try:
                command = json.loads(fn.get("arguments") or "{}").get("command")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(command, str):
                out[command] = str(results[c.get("id")])
    return out


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _clip(text: str, n: int = _PREVIEW) -> str:
    text = _one_line(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _last_said(messages: Sequence[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip():
            return _clip(m["content"])
    return ""


def _last_calls(messages: Sequence[dict[str, Any]]) -> list[str]:
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls: list[str] = []
    for m in messages:
        for c in m.get("tool_calls") or () if m.get("role") == "assistant" else ():
            fn = c.get("function") or {}
            outcome = results.get(c.get("id"))
            first = _clip(str(outcome).split("\n", 1)[0], 100) if outcome else "(no result)"
            calls.append(f"{fn.get('name', '?')} {_brief_args(str(fn.get('arguments') or ''))} → {first}")
    return calls[-_LAST_CALLS:]


def _brief_args(arguments: str) -> str:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return _clip(arguments, 80)
    if isinstance(parsed, dict):
        for key in ("command", "path", "pattern", "summary"):
            if isinstance(parsed.get(key), str):
                return f"`{_clip(parsed[key], 80)}`"
    return _clip(json.dumps(parsed), 80)
