"""Span attributes from keel's events: the OpenTelemetry GenAI names (gen_ai.*, server.*, error.type)
where the conventions have one, ``keel.*`` for the rest. Pure functions of events, so they are tested
without an exporter. Text the model or the person wrote (the task, replies, tool arguments and
results, shell commands) is included only with ``content`` (opt-in)."""

from __future__ import annotations

import json
import shlex
from typing import Any
from urllib.parse import urlsplit

Event = dict[str, Any]
AGENT_NAME = "keel"


def provider_name(start: Event) -> str:
    """gen_ai.provider.name: the serving software where provenance names it, else the wire protocol."""
    serving = start.get("serving") or {}
    if serving.get("server"):
        return str(serving["server"])
    return "llama_cpp_python" if (start.get("config") or {}).get("engine", {}).get("local_model") else "openai"


def _engine(start: Event) -> dict[str, Any]:
    return (start.get("config") or {}).get("engine") or {}


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """OTLP attributes are scalars or lists of one scalar type; None is dropped."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            out[key] = [v if isinstance(v, (str, bool, int, float)) else json.dumps(v, default=str) for v in value]
        elif isinstance(value, dict):
            out[key] = json.dumps(value, ensure_ascii=False, default=str)
        else:
            out[key] = value
    return out


def serving_attributes(start: Event) -> dict[str, Any]:
    """The serving provenance (keel.engine.provenance) flattened: keel.serving.<field>."""
    serving = start.get("serving") or {}
    return {f"keel.serving.{k}": v for k, v in serving.items() if isinstance(v, (str, int, float, bool))}


def run_attributes(start: Event, content: bool) -> dict[str, Any]:
    engine = _engine(start)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.agent.version": (start.get("serving") or {}).get("keel_version"),
        "gen_ai.conversation.id": start.get("session_id"), "gen_ai.provider.name": provider_name(start),
        "gen_ai.request.model": start.get("model"), "keel.workspace": start.get("workspace"),
        "keel.sandbox.tier": start.get("sandbox"), "keel.sandbox.confining": start.get("confining"),
        "keel.protection": start.get("protection"), "keel.attended": start.get("attended"),
        "keel.tools": list(start.get("tools") or []),
        "gen_ai.request.temperature": engine.get("temperature"), "gen_ai.request.seed": engine.get("seed"),
        "gen_ai.request.max_tokens": engine.get("max_tokens"), **serving_attributes(start),
    }
    if content and start.get("task"):
        attrs["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": start["task"]}]}], ensure_ascii=False)
    return _clean(attrs)


def stop_attributes(stop: Event) -> dict[str, Any]:
    usage = stop.get("usage") or {}
    attrs = {"keel.stop.status": stop.get("status"), "keel.stop.reason": stop.get("reason"),
             "keel.cost_usd": stop.get("cost_usd"), "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
             "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
             "gen_ai.usage.cache_read.input_tokens": usage.get("cached_tokens"), "keel.steps": stop.get("step")}
    if stop.get("status") == "error":
        attrs["error.type"] = str(stop.get("reason") or "error")
    return _clean(attrs)


def _server(start: Event) -> dict[str, Any]:
    url = _engine(start).get("base_url")
    if not url:
        return {}
    parts = urlsplit(str(url))
    return {"server.address": parts.hostname, "server.port": parts.port or (443 if parts.scheme == "https" else 80)}


def chat_attributes(e: Event, start: Event, content: bool) -> dict[str, Any]:
    usage = e.get("usage") or {}
    engine = _engine(start)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(start),
        "gen_ai.request.model": start.get("model"), "gen_ai.response.model": e.get("model"),
        "gen_ai.conversation.id": start.get("session_id"),
        "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
        "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
        "gen_ai.usage.cache_read.input_tokens": usage.get("cached_tokens"),
        "gen_ai.response.finish_reasons": [e["finish_reason"]] if e.get("finish_reason") else None,
        "gen_ai.request.temperature": engine.get("temperature"), "gen_ai.request.seed": engine.get("seed"),
        "gen_ai.request.max_tokens": engine.get("max_tokens"), **_server(start),
        "keel.step": e.get("step", 0), "keel.latency_s": e.get("latency_s"), "keel.retries": e.get("retries", 0),
        "keel.prefix_reuse": e.get("prefix_reuse"), "keel.tool_calls": e.get("tool_calls"),
        "keel.tool_call_format": e.get("tool_call_format") or None, "keel.cut_reason": e.get("cut_reason"),
        "keel.usage.estimated": bool(usage.get("estimated")),
    }
    if content:
        parts = [{"type": "reasoning", "content": e["reasoning"]}] if e.get("reasoning") else []
        parts += [{"type": "text", "content": e.get("content") or e.get("reply") or ""}]
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": parts, "finish_reason": e.get("finish_reason") or ""}], ensure_ascii=False)
    return _clean(attrs)


def tool_attributes(e: Event, content: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": e.get("name"),
        "gen_ai.tool.call.id": e.get("call_id"), "gen_ai.tool.type": "function",
        "keel.tool.ok": bool(e.get("ok")), "keel.tool.not_run": bool(e.get("not_run")),
        "keel.tool.invalid": bool(e.get("invalid")), "keel.tool.repeat": e.get("repeat", 0),
        "keel.tool.output_bytes": e.get("output_bytes"), "keel.files_changed": list(e.get("files_changed") or []),
        "keel.step": e.get("step", 0),
    }
    if not e.get("ok"):
        attrs["error.type"] = "not_run" if e.get("not_run") else "invalid_arguments" if e.get("invalid") else "tool_error"
    if content:
        attrs["gen_ai.tool.call.arguments"] = e.get("arguments")
        attrs["gen_ai.tool.call.result"] = e.get("result_preview")
    return _clean(attrs)


def command_attributes(e: Event, approvals: list[Event], start: Event, content: bool) -> dict[str, Any]:
    """The policy's decision on a command (allow unless an approval event said otherwise) and the tier."""
    shell = [a for a in approvals if a.get("action") == "shell"]
    last = shell[-1] if shell else None
    try:
        command = str(json.loads(e.get("arguments") or "{}").get("command") or "")
    except (json.JSONDecodeError, AttributeError):
        command = ""
    try:
        program = shlex.split(command)[0] if command.strip() else ""
    except ValueError:
        program = command.split()[0] if command.split() else ""
    attrs = {"keel.policy.decision": last.get("decision") if last else "allow",
             "keel.policy.allowed": bool(last.get("allowed")) if last else not e.get("not_run"),
             "keel.policy.how": last.get("how") if last else None,
             "keel.sandbox.tier": start.get("sandbox"), "keel.sandbox.confining": start.get("confining"),
             "keel.command.program": program or None}
    if content:
        attrs["keel.command"] = command
    return _clean(attrs)


def check_attributes(check: Event, verification: Event, start: Event) -> dict[str, Any]:
    """One check the gate ran: its command is the project's, not the model's, so it is always included."""
    return _clean({
        "keel.check.category": check.get("category"), "keel.check.command": check.get("command"),
        "keel.check.source": check.get("source"), "keel.exit_code": check.get("exit_code"),
        "keel.check.passed": bool(check.get("passed")), "keel.check.timed_out": bool(check.get("timed_out")),
        "keel.check.digest": check.get("digest") or verification.get("digest"),
        "keel.check.failing_tests": list(check.get("failing_tests") or []),
        "keel.policy.decision": "deny" if check.get("refused") else "allow",
        "keel.policy.how": check.get("refused"), "keel.sandbox.tier": start.get("sandbox"),
        "keel.check.duration_s": check.get("duration_s")})
