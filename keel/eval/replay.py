"""Replay a recorded run: its model outputs, re-served by the scripted engine to today's keel.

The model's side is fixed (what it answered, turn by turn, from the ``model_call`` events); the
harness side is live (tools, truncation, edit matching, policy, gate, stop rules). Where a tool's
observation, a pushback or the stop now differs from the recording, a harness change did it — a
regression test that needs no model. ``to_script_lines`` turns the same turns into a script.jsonl,
so a real run can become a scripted eval case.

The functions here are pure; ``keel.cli.replay`` lays out the workspace and runs keel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keel.core.assists import NAMES

TEXT_FORMATS = ("hermes", "qwen3_coder")


class ReplayError(ValueError):
    """The log cannot be replayed (no model turns, not a keel log)."""


@dataclass(frozen=True)
class Recorded:
    task: str
    workspace: str
    steps: list[dict[str, Any]]
    truncated_arguments: int  # calls taken from tool_call events whose arguments may be cut at 4000 chars
    turns: int = 0            # the model's turns; ``steps`` also holds change_file's editor replies, in order


def recorded_turns(events: Sequence[Mapping[str, Any]]) -> Recorded:
    start = next((e for e in events if e.get("type") == "session_start"), None)
    if start is None:
        raise ReplayError("no session_start event: is this a keel session log?")
    calls_by_step: dict[int, list[Mapping[str, Any]]] = {}
    for e in events:
        if e.get("type") == "tool_call":
            calls_by_step.setdefault(int(e.get("step") or 0), []).append(e)
    steps: list[dict[str, Any]] = []
    cut = 0
    for e in events:
        if e.get("type") == "change_request":   # change_file's editor, asked inside a tool call: served in turn
            steps.append({"content": str(e.get("reply") or ""), "tool_calls": [], **_usage(e),
                          **({"finish_reason": "length"} if e.get("finish_reason") == "length" else {})})
        if e.get("type") != "model_call":
            continue
        replay = e.get("replay") if isinstance(e.get("replay"), Mapping) else None
        if replay is not None:
            calls = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in replay.get("calls") or []]
            content = replay.get("content") if replay.get("content") is not None else e.get("content") or ""
        else:  # a log from before model_call carried its calls: rebuild them from the tool_call events
            logged = calls_by_step.get(int(e.get("step") or 0), [])
            calls = [{"id": c.get("call_id") or f"call_{len(steps)}_{i}", "name": c["name"],
                      "arguments": c.get("arguments") or "{}"} for i, c in enumerate(logged)]
            cut += sum(1 for c in logged if len(c.get("arguments") or "") >= 4000)
            content = e.get("content") or ""
        step: dict[str, Any] = {"content": content or None, "tool_calls": calls, **_usage(e)}
        fmt = str(e.get("tool_call_format") or "")
        if calls and fmt in TEXT_FORMATS and all(_is_object(c["arguments"]) for c in calls):
            step["text_tool_calls"] = fmt  # served as text again, so recovery is exercised again
            for c in calls:
                c.pop("id", None)
        if e.get("reasoning"):
            step["reasoning"] = e["reasoning"]
        if e.get("finish_reason") == "length":
            step["finish_reason"] = "length"
        steps.append(step)
    turns = sum(1 for e in events if e.get("type") == "model_call")
    if not turns:
        raise ReplayError("the log has no model_call events: nothing to replay")
    return Recorded(task=str(start.get("task") or ""), workspace=str(start.get("workspace") or ""),
                    steps=steps, truncated_arguments=cut, turns=turns)


def replay_config(events: Sequence[Mapping[str, Any]]) -> str:
    """The user config (TOML) a replay runs with so that change_file and the assists act as they did:
    the small profile when the recorded run offered change_file, the assists it had on and off, as
    many candidates, the same token budget; "" for a run of the full profile (the person's own config applies, as before)."""
    start = next((e for e in events if e.get("type") == "session_start"), {})
    if "change_file" not in (start.get("tools") or []):
        return ""
    on = set(start.get("assists") or [])
    lines = ["[engine]", 'profile = "small"', "", "[assists]",
             *(f"{name} = {'true' if name in on else 'false'}" for name in NAMES)]
    config = start.get("config") or {}
    candidates, tokens = (config.get("verify") or {}).get("candidates"), (config.get("limits") or {}).get("max_tokens")
    if isinstance(candidates, int):
        lines += ["", "[verify]", f"candidates = {candidates}"]
    if isinstance(tokens, int):   # with the tokens served as recorded, a budget stops the search where it did
        lines += ["", "[limits]", f"max_tokens = {tokens}"]
    return "\n".join(lines) + "\n"


def candidates_of(events: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    """Step -> change_file's candidates in it (keel.drive.candidates), each as "PATH #N kept" or
    "PATH #N lost (why)"."""
    out: dict[int, list[str]] = {}
    for e in events:
        if e.get("type") == "candidate":
            fate = "kept" if e.get("kept") else f"lost ({e.get('why')})"
            out.setdefault(int(e.get("step") or 0), []).append(f"{e.get('path')} #{e.get('n')} {fate}")
    return out


def _usage(e: Mapping[str, Any]) -> dict[str, Any]:
    """The tokens a turn reported, served again so the run's token budget (and the candidates' search,
    keel.drive.candidates) spends as it did; nothing when the server reported none (keel estimated)."""
    usage = e.get("usage")
    if not isinstance(usage, Mapping) or usage.get("estimated"):
        return {}
    return {"usage": {k: int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")}}


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, json.JSONDecodeError):
        return False


def to_script_lines(steps: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for step in steps:
        clean = {k: v for k, v in step.items() if v not in (None, [], "")}
        lines.append(json.dumps(clean, ensure_ascii=False))
    return "\n".join(lines) + "\n"


# ---- comparing the recorded run with the replayed one --------------------------------------------

_VOLATILE = (
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b"), "<session>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b"), "<time>"),
    (re.compile(r"/tmp/[\w.@+-]+"), "<tmp>"),
    (re.compile(r"\b0x[0-9a-f]{6,}\b"), "<addr>"),
)


def normalize(text: str, workspace: str) -> str:
    """Hide what differs between two honest runs: the workspace path, timings, session ids, tmp dirs."""
    if workspace:
        text = text.replace(workspace.rstrip("/"), "<workspace>")
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


@dataclass(frozen=True)
class Difference:
    step: int
    call: int | None      # 1-based index of the call within the step, None for step-level facts
    tool: str
    field: str
    recorded: Any
    now: Any

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "call": self.call, "tool": self.tool, "field": self.field,
                "recorded": self.recorded, "now": self.now}


def _calls(events: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], Mapping[str, Any]]:
    out: dict[tuple[int, int], Mapping[str, Any]] = {}
    seen: dict[int, int] = {}
    for e in events:
        if e.get("type") == "tool_call":
            step = int(e.get("step") or 0)
            seen[step] = seen.get(step, 0) + 1
            out[(step, seen[step])] = e
    return out


def _pushbacks(events: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for e in events:
        if e.get("type") == "decision" and e.get("pushback_kind"):
            out.setdefault(int(e.get("step") or 0), []).append(str(e["pushback_kind"]))
    return out


def stop_of(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    stop: Mapping[str, Any] = next((e for e in reversed(events) if e.get("type") == "stop"), {})
    return {"status": stop.get("status"), "reason": stop.get("reason"), "steps": stop.get("step")}


def compare_runs(recorded: Sequence[Mapping[str, Any]], replayed: Sequence[Mapping[str, Any]],
                 recorded_ws: str, replayed_ws: str) -> list[Difference]:
    diffs: list[Difference] = []
    old_calls, new_calls = _calls(recorded), _calls(replayed)
    for key in sorted(set(old_calls) | set(new_calls)):
        step, index = key
        old, new = old_calls.get(key), new_calls.get(key)
        tool = str((old or new or {}).get("name"))
        if old is None or new is None:
            diffs.append(Difference(step, index, tool, "call", "ran" if old else "absent", "ran" if new else "absent"))
            continue
        for field in ("ok", "invalid", "repeat"):
            if field in old and field in new and old.get(field) != new.get(field):
                diffs.append(Difference(step, index, tool, field, old.get(field), new.get(field)))
        before = normalize(str(old.get("result_preview") or ""), recorded_ws)
        after = normalize(str(new.get("result_preview") or ""), replayed_ws)
        if before != after:
            diffs.append(Difference(step, index, tool, "output", before, after))
        if sorted(old.get("files_changed") or []) != sorted(new.get("files_changed") or []):
            diffs.append(Difference(step, index, tool, "files_changed", old.get("files_changed"), new.get("files_changed")))
    old_cand, new_cand = candidates_of(recorded), candidates_of(replayed)
    for step in sorted(set(old_cand) | set(new_cand)):
        if old_cand.get(step) != new_cand.get(step):
            diffs.append(Difference(step, None, "change_file", "candidates", old_cand.get(step), new_cand.get(step)))
    old_push, new_push = _pushbacks(recorded), _pushbacks(replayed)
    for step in sorted(set(old_push) | set(new_push)):
        if old_push.get(step) != new_push.get(step):
            diffs.append(Difference(step, None, "", "pushback", old_push.get(step), new_push.get(step)))
    old_stop, new_stop = stop_of(recorded), stop_of(replayed)
    if old_stop != new_stop:
        diffs.append(Difference(int(new_stop.get("steps") or 0), None, "", "stop", old_stop, new_stop))
    return diffs


def format_differences(diffs: Sequence[Difference]) -> str:
    lines = []
    for d in diffs:
        where = f"step {d.step}" + (f" call {d.call} {d.tool}" if d.call else "")
        if d.field == "output":
            lines += [f"  {where}: output differs", f"    recorded: {_one_line(d.recorded)}",
                      f"    now:      {_one_line(d.now)}"]
        else:
            lines.append(f"  {where}: {d.field} was {json.dumps(d.recorded)}, now {json.dumps(d.now)}")
    return "\n".join(lines)


def _one_line(text: Any, limit: int = 160) -> str:
    flat = str(text).replace("\n", "⏎")
    return flat if len(flat) <= limit else flat[:limit] + "…"
