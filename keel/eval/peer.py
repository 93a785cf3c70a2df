"""mini-swe-agent on the same case, engine, step limit and temperature, graded the same way.

The peer runs in its own subprocess (``keel.eval.peer_main``) with its default configuration. Its
trajectory is translated into keel-shaped events (model_call, tool_call, decision) so the very same
metric code counts its steps, tokens, idle turns and format errors. With ``--engine scripted`` the
case's ``script.mini-swe-agent.jsonl`` is served (mini-swe-agent calls one ``bash`` tool, so keel's
script does not fit it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.eval.cases import Case, CaseError

if TYPE_CHECKING:
    from keel.eval.job import AgentRun, JobSpec

PEER = "mini-swe-agent"
PEER_SCRIPT = f"script.{PEER}.jsonl"
# mini-swe-agent's exit statuses, as keel stop reasons
STOP_REASONS = {"Submitted": "complete", "LimitsExceeded": "limit:steps", "TimeExceeded": "limit:wall_clock",
                "RepeatedFormatError": "limit:format_errors"}


def peer_problem() -> str | None:
    if importlib.util.find_spec("minisweagent") is None:
        return "--agent mini-swe-agent needs the mini-swe-agent package: pip install 'keel[peer]'"
    return None


def run_peer(spec: JobSpec, case: Case, workspace: Path, tmp: Path) -> AgentRun:
    from keel.eval.job import HARNESS_GRACE_S, AgentRun, keel_pythonpath, last_json_object, run_process

    if problem := peer_problem():
        raise CaseError(problem)
    trajectory = tmp / "trajectory.json"
    with contextlib.ExitStack() as stack:
        if spec.engine == "scripted":
            script = case.path / PEER_SCRIPT
            if not script.is_file():
                raise CaseError(f"{case.path}: no {PEER_SCRIPT}, so {PEER} cannot run it with --engine scripted")
            from keel.testing.server import ScriptedEngineServer

            server = stack.enter_context(ScriptedEngineServer(script))
            base_url, model = server.base_url, server.model
        else:
            base_url, model = spec.base_url or "", spec.model or ""
        api_key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        request = {"task": case.task, "cwd": str(workspace), "model": model, "base_url": base_url,
                   "api_key": api_key, "temperature": spec.temperature, "step_limit": spec.max_steps,
                   "wall_time_limit_seconds": spec.timeout_s, "trajectory": str(trajectory)}
        env = {**os.environ, "PYTHONPATH": keel_pythonpath(), "MSWEA_SILENT_STARTUP": "1",
               "MSWEA_GLOBAL_CONFIG_DIR": str(tmp / "mswea-config"), "MSWEA_COST_TRACKING": "ignore_errors"}
        started = time.monotonic()
        code, stdout, stderr, timed_out = run_process(
            [sys.executable, "-m", "keel.eval.peer_main"], cwd=workspace, env=env,
            timeout_s=spec.timeout_s + HARNESS_GRACE_S, stdin=json.dumps(request))
        duration = time.monotonic() - started
    answer = last_json_object(stdout) or {}
    data = json.loads(trajectory.read_text(encoding="utf-8")) if trajectory.is_file() else {}
    events = trajectory_events(data)
    log_text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
    exit_status = str(answer.get("exit_status") or (data.get("info") or {}).get("exit_status") or "")
    if timed_out:
        return AgentRun("incomplete", "harness_timeout", None, events, log_text, None, code)
    if not answer:
        return AgentRun(None, None, None, events, log_text,
                        f"{PEER} exited {code} without a result: {stderr.strip()[-2000:]}", code)
    reason = STOP_REASONS.get(exit_status, exit_status or "unknown")
    status = "complete" if reason == "complete" else "incomplete"
    result = {"status": status, "stop_reason": reason, "steps": answer.get("api_calls"),
              "duration_s": round(duration, 3), "summary": "", "usage": _usage_totals(events)}
    return AgentRun(status, reason, result, events, log_text, answer.get("error"), code)


def _usage_totals(events: list[dict[str, Any]]) -> dict[str, int]:
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    for e in events:
        if e["type"] == "model_call":
            for key in totals:
                totals[key] += int(e["usage"].get(key) or 0)
    return totals


def _model_call(step: int, response: dict[str, Any], content: str, calls: int) -> dict[str, Any]:
    usage = response.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return {"type": "model_call", "step": step, "agent": PEER,
            "usage": {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                      "completion_tokens": int(usage.get("completion_tokens") or 0),
                      "cached_tokens": int(details.get("cached_tokens") or 0)},
            "tool_calls": calls, "tool_call_format": "structured" if calls else "", "content": content[:2000]}


def trajectory_events(data: dict[str, Any]) -> list[dict[str, Any]]:
    """mini-swe-agent's saved messages as keel-shaped events (pure).

    A reply without a usable call never becomes an assistant message there: it is a FormatError
    user message whose ``extra.response`` holds the model's answer, so it counts as a model call
    with only invalid calls (an idle turn) plus a ``format_error`` pushback.
    """
    events: list[dict[str, Any]] = []
    step = 0
    for message in data.get("messages") or []:
        extra = message.get("extra") or {}
        raw = extra.get("response")
        response: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if message.get("role") == "assistant":
            step += 1
            calls = message.get("tool_calls") or []
            events.append(_model_call(step, response, str(message.get("content") or ""), len(calls)))
            for action in extra.get("actions") or []:
                events.append({"type": "tool_call", "step": step, "name": "bash",
                               "arguments": json.dumps({"command": action.get("command")})[:4000],
                               "ok": True, "invalid": False})
        elif extra.get("interrupt_type") == "FormatError":
            step += 1
            choice = ((response.get("choices") or [{}])[0].get("message")) or {}
            calls = choice.get("tool_calls") or []
            events.append(_model_call(step, response, str(choice.get("content") or ""), len(calls)))
            for call in calls:
                fn = call.get("function") or {}
                events.append({"type": "tool_call", "step": step, "name": str(fn.get("name")),
                               "arguments": str(fn.get("arguments"))[:4000], "ok": False, "invalid": True})
            events.append({"type": "decision", "step": step, "verdict": "continue", "reason": "format_error",
                           "pushback_kind": "format_error"})
        elif message.get("role") == "tool":
            output = str(message.get("content") or "")
            for e in reversed(events):
                if e["type"] == "tool_call" and "result_preview" not in e:
                    e["result_preview"] = output[:300]
                    break
    return events
