"""Numbers from one run (its result JSON and JSONL event log) and their aggregate over many runs.

Pure functions over dicts: no files, no clock. The record a run leaves in the eval's output folder
is built by ``keel.eval.execute``; everything here reads such records.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from keel.loop.variety import fingerprint  # the loop's own idea of the same reply

# Formats a recovered call can have; "structured" is a native tool call, "" a turn without calls.
NATIVE_FORMATS = frozenset({"", "structured", "native"})


def run_metrics(result: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-run metrics from keel's result object (may be None when the run crashed) and its events."""
    result = result or {}
    calls = [e for e in events if e.get("type") == "model_call"]
    tools = [e for e in events if e.get("type") == "tool_call"]
    decisions = [e for e in events if e.get("type") == "decision"]
    valid_by_step: Counter[int] = Counter(int(t.get("step", 0)) for t in tools if not t.get("invalid"))
    usage = result.get("usage") or {}

    def total(key: str) -> int:
        if key in usage and usage[key] is not None:
            return int(usage[key])
        return sum(int((c.get("usage") or {}).get(key) or 0) for c in calls)

    reuse = [float(c["prefix_reuse"]) for c in calls if isinstance(c.get("prefix_reuse"), int | float)]
    prompt = total("prompt_tokens")
    cached = total("cached_tokens")
    pushbacks = Counter(str(d["pushback_kind"]) for d in decisions if d.get("pushback_kind"))
    return {
        "steps": int(result.get("steps") or len(calls)),
        "prompt_tokens": prompt,
        "completion_tokens": total("completion_tokens"),
        "cached_tokens": cached,
        "cached_share": round(cached / prompt, 4) if prompt else None,
        "prefix_reuse": round(statistics.fmean(reuse), 4) if reuse else None,
        "tool_calls": len(tools),
        "idle_turns": sum(1 for c in calls if valid_by_step[int(c.get("step", 0))] == 0),
        "invalid_calls": sum(1 for t in tools if t.get("invalid")),
        "recovered_calls": sum(int(c.get("tool_calls") or 0) for c in calls
                               if str(c.get("tool_call_format") or "") not in NATIVE_FORMATS),
        "malformed_turns": pushbacks.get("malformed_call", 0),
        "pushbacks": dict(sorted(pushbacks.items())),
        "verification_rounds": sum(1 for e in events if e.get("type") == "verification"),
        "same_replies_in_row": same_replies_in_row(calls),
        "engine_retries": sum(int(c.get("retries") or 0) for c in calls),
        # the times each assist for small models acted (keel.core.assists: its `assist` events)
        "assists_acted": dict(sorted(Counter(str(e.get("name")) for e in events if e.get("type") == "assist").items())),
        "duration_s": float(result.get("duration_s") or 0.0),
        "cost_usd": result.get("cost_usd"),
    }


def same_replies_in_row(calls: Sequence[Mapping[str, Any]]) -> int:
    """The longest run of consecutive model replies that are the same text with the same calls
    (issue 25: at temperature 0 a small model sent a refused reply again and again). 0: no replies."""
    longest = run = 0
    last: object = None
    for c in calls:
        replay = c.get("replay") or {}
        key = fingerprint(replay.get("content") or c.get("content") or "",
                          ((str(x.get("name")), str(x.get("arguments"))) for x in replay.get("calls") or ()))
        run = run + 1 if key == last else 1
        last, longest = key, max(longest, run)
    return longest


def outcome(status: str | None, passed: bool, error: str | None = None) -> str:
    """One word per run: success (claimed complete, acceptance passes), done_unclaimed (acceptance
    passes but the run did not end complete, e.g. it stopped at limit:retries: the user was told the
    task is not done, so it is not a success), false_done (claimed complete, acceptance fails),
    failed, error."""
    if error:
        return "error"
    if passed:
        return "success" if status == "complete" else "done_unclaimed"
    if status == "complete":
        return "false_done"
    return "failed"


# ---- aggregation ---------------------------------------------------------------------------------

NUMERIC = ("steps", "prompt_tokens", "completion_tokens", "cached_tokens", "tool_calls", "idle_turns",
           "invalid_calls", "recovered_calls", "malformed_turns", "verification_rounds", "duration_s",
           "wall_s")


def _dist(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {"mean": round(statistics.fmean(ordered), 3), "median": round(statistics.median(ordered), 3),
            "min": round(ordered[0], 3), "max": round(ordered[-1], 3), "sum": round(sum(ordered), 3)}


def aggregate(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals and distributions over records of one agent (any number of cases and repeats)."""
    rows = list(records)
    outcomes = Counter(str(r.get("outcome")) for r in rows)
    stops = Counter(str(r.get("stop_reason") or ("error" if r.get("outcome") == "error" else "none")) for r in rows)
    pushbacks: Counter[str] = Counter()
    for r in rows:
        pushbacks.update((r.get("metrics") or {}).get("pushbacks") or {})
    metrics = [r.get("metrics") or {} for r in rows]
    dists = {key: _dist([float(m[key]) for m in metrics if isinstance(m.get(key), int | float)])
             for key in NUMERIC}
    costs = [float(m["cost_usd"]) for m in metrics if isinstance(m.get("cost_usd"), int | float)]
    reuse = [float(m["prefix_reuse"]) for m in metrics if isinstance(m.get("prefix_reuse"), int | float)]
    prompt = sum(int(m.get("prompt_tokens") or 0) for m in metrics)
    cached = sum(int(m.get("cached_tokens") or 0) for m in metrics)
    n = len(rows)
    return {
        "runs": n,
        "cases": len({r.get("case", {}).get("id") for r in rows}),
        "success": outcomes.get("success", 0),
        "success_rate": round(outcomes.get("success", 0) / n, 4) if n else None,
        "false_done": outcomes.get("false_done", 0),
        "done_unclaimed": outcomes.get("done_unclaimed", 0),
        "failed": outcomes.get("failed", 0),
        "errors": outcomes.get("error", 0),
        "stop_reasons": dict(stops.most_common()),
        "pushbacks": dict(sorted(pushbacks.items())),
        "distributions": dists,
        "cached_share": round(cached / prompt, 4) if prompt else None,
        "prefix_reuse": round(statistics.fmean(reuse), 4) if reuse else None,
        "cost_usd": round(sum(costs), 6) if costs and len(costs) == n else None,
    }


def by_agent(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(str(r.get("agent") or "keel"), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] != "keel", kv[0])))


def case_table(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[Mapping[str, Any]]]]:
    """case id -> agent -> records sorted by repeat."""
    table: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for r in records:
        cid = str((r.get("case") or {}).get("id"))
        table.setdefault(cid, {}).setdefault(str(r.get("agent") or "keel"), []).append(r)
    for per_agent in table.values():
        for rows in per_agent.values():
            rows.sort(key=lambda x: int(x.get("repeat") or 0))
    return dict(sorted(table.items()))
