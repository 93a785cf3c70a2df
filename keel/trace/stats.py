"""What a session's event log says about it: one summary line for `keel log`, and the numbers of
`keel stats` (tokens, cache, tools, verification, cost, hotspots). Pure: events in, dicts out."""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from typing import Any

from keel.loop.limits import Prices

Event = dict[str, Any]

READS_HOTSPOT = 3           # the same file read this many times
SAME_EDIT_HOTSPOT = 2       # the same old_text in the same file edited this many times
EDITS_PER_FILE_HOTSPOT = 5  # one file edited this many times
LONG_OUTPUT_BYTES = 20_000  # a tool result this large fills the context fast


def _usage(e: Event) -> dict[str, Any]:
    u = e.get("usage")
    return u if isinstance(u, dict) else {}


def _args(e: Event) -> dict[str, Any]:
    try:
        parsed = json.loads(e.get("arguments") or "{}")
    except (json.JSONDecodeError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def summarize(events: list[Event], prices: Prices | None = None) -> dict[str, Any]:
    """One session in a line: task, status, steps, tokens, cost, when."""
    start = next((e for e in events if e.get("type") == "session_start"), {})
    stop = next((e for e in reversed(events) if e.get("type") == "stop"), None)
    calls = [e for e in events if e.get("type") == "model_call"]
    prompt = sum(int(_usage(c).get("prompt_tokens", 0)) for c in calls)
    completion = sum(int(_usage(c).get("completion_tokens", 0)) for c in calls)
    cached = sum(int(_usage(c).get("cached_tokens", 0)) for c in calls)
    steps = _steps(events)
    status = "no stop (crashed or running)"
    if stop is not None:
        status = "interrupted" if stop.get("reason") == "interrupted" else str(stop.get("status"))
        if stop.get("reason") and stop.get("reason") not in ("complete", "interrupted"):
            status += f" ({stop.get('reason')})"
    return {"session_id": start.get("session_id") or (events[0].get("session_id") if events else None),
            "task": start.get("task") or "", "workspace": start.get("workspace"), "model": start.get("model"),
            "status": status, "steps": steps, "prompt_tokens": prompt, "completion_tokens": completion,
            "cached_tokens": cached, "tokens": prompt + completion,
            "cost_usd": _cost(prices, prompt, cached, completion),
            "started": start.get("ts") or (events[0].get("ts") if events else None),
            "resumed": sum(1 for e in events if e.get("type") == "resume")}


def _steps(events: list[Event]) -> int:
    """The session's steps: each run in it (a REPL task, a resume) numbers its own from 1, or from the
    step it resumed at, so the runs' own counts add up (a sub-agent's steps are its parent's call)."""
    total = last = base = 0
    for e in events:
        kind = e.get("type")
        if kind == "session_start":
            total, last, base = total + max(last - base, 0), 0, 0
        elif kind == "resume":
            base = last = int(e.get("from_step") or 0)
        elif kind in ("model_call", "stop") and not e.get("subagent"):
            last = max(last, int(e.get("step") or 0))
    return total + max(last - base, 0)


def _cost(prices: Prices | None, prompt: int, cached: int, completion: int) -> float | None:
    if prices is None or not (prices.input_per_m or prices.output_per_m or prices.cached_input_per_m):
        return None  # no price table: the cost is unknown, not zero
    return round(prices.cost(prompt, cached, completion), 6)


def session_stats(events: list[Event], prices: Prices | None = None) -> dict[str, Any]:
    summary = summarize(events, prices)
    calls = []
    for e in (e for e in events if e.get("type") == "model_call"):
        u = _usage(e)
        prompt, cached = int(u.get("prompt_tokens", 0)), int(u.get("cached_tokens", 0))
        calls.append({"step": e.get("step"), "prompt_tokens": prompt, "completion_tokens": int(u.get("completion_tokens", 0)),
                      "cached_tokens": cached, "estimated": bool(u.get("estimated")),
                      "cache_hit": round(cached / prompt, 4) if prompt else None,
                      "prefix_reuse": e.get("prefix_reuse"), "latency_s": e.get("latency_s"),
                      "retries": e.get("retries", 0), "finish_reason": e.get("finish_reason")})
    prompt_total = summary["prompt_tokens"]
    reuse = [float(c["prefix_reuse"]) for c in calls if isinstance(c["prefix_reuse"], int | float)]
    tool_events = [e for e in events if e.get("type") == "tool_call"]
    ts = [float(e["ts"]) for e in events if isinstance(e.get("ts"), int | float)]
    return {
        **summary,
        "calls": calls,
        "totals": {"prompt_tokens": prompt_total, "completion_tokens": summary["completion_tokens"],
                   "cached_tokens": summary["cached_tokens"],
                   "estimated": any(c["estimated"] for c in calls),
                   "cache_hit": round(summary["cached_tokens"] / prompt_total, 4) if prompt_total else None,
                   "prefix_reuse": round(statistics.fmean(reuse), 4) if reuse else None},
        "tools": tool_table(tool_events),
        "tool_calls": len(tool_events),
        "verification_rounds": sum(1 for e in events if e.get("type") == "verification"),
        "compactions": sum(1 for e in events if e.get("type") == "compaction"),
        "duration_s": round(max(ts) - min(ts), 3) if ts else 0.0,
        "hotspots": hotspots(tool_events),
        "serving": _serving(events),
    }


def _serving(events: list[Event]) -> dict[str, Any] | None:
    """The session's serving record (session_start) with the tool-call formats its replies used."""
    start = next((e for e in events if e.get("type") == "session_start"), {})
    if not start.get("serving"):
        return None
    formats: dict[str, int] = {}
    for e in events:
        if e.get("type") == "model_call" and e.get("tool_calls"):
            fmt = str(e.get("tool_call_format") or "structured")
            formats[fmt] = formats.get(fmt, 0) + 1
    return {**start["serving"], "tool_call_formats": formats}


def tool_table(tool_events: list[Event]) -> list[dict[str, Any]]:
    by_name: dict[str, list[Event]] = defaultdict(list)
    for e in tool_events:
        by_name[str(e.get("name"))].append(e)
    rows = []
    for name, evs in sorted(by_name.items(), key=lambda kv: -len(kv[1])):
        ms = [float(e.get("elapsed_ms") or 0.0) for e in evs]
        out = [_output_bytes(e) for e in evs]
        rows.append({"name": name, "count": len(evs), "failed": sum(1 for e in evs if not e.get("ok")),
                     "median_ms": round(statistics.median(ms), 2), "max_ms": round(max(ms), 2),
                     "output_bytes": sum(out), "max_output_bytes": max(out)})
    return rows


def _output_bytes(e: Event) -> int:
    size = e.get("output_bytes")
    return int(size) if isinstance(size, int) else len(str(e.get("result_preview") or "").encode())


def hotspots(tool_events: list[Event]) -> list[str]:
    """Hints at wasted steps: the same file read again and again, one place edited over and over,
    results long enough to crowd the context."""
    hints: list[str] = []
    reads: Counter[str] = Counter()
    edits: Counter[str] = Counter()
    same_place: Counter[tuple[str, str]] = Counter()
    for e in tool_events:
        args = _args(e)
        path = str(args.get("path") or "")
        if e.get("name") == "read_file" and path:
            reads[path] += 1
        elif e.get("name") in ("edit_file", "write_file", "change_file") and path:
            edits[path] += 1
            olds = [str(args.get("old_text") or "")] + [str(i.get("old_text") or "") for i in args.get("edits") or []
                                                       if isinstance(i, dict)]
            for old in filter(None, olds):
                same_place[(path, old.strip()[:200])] += 1
        if (size := _output_bytes(e)) >= LONG_OUTPUT_BYTES:
            hints.append(f"very long output: {e.get('name')} at step {e.get('step')} returned {size:,} bytes")
    hints += [f"{p} read {n} times" for p, n in reads.most_common() if n >= READS_HOTSPOT]
    hints += [f"{p} edited {n} times" for p, n in edits.most_common() if n >= EDITS_PER_FILE_HOTSPOT]
    hints += [f"the same place in {p} edited {n} times ({_first_line(old)!r})"
              for (p, old), n in same_place.most_common() if n >= SAME_EDIT_HOTSPOT]
    return hints


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= 60 else line[:59] + "…"
