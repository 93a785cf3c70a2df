"""``keel eval compare RUN_A RUN_B``: per-metric deltas and the cases whose outcome changed.

Repeats are shown as counts ("2/3 → 3/3") rather than averaged away, so a flip inside the noise
of one repeat is visible as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from keel.engine.provenance import SETUP_FIELDS, setup_differences
from keel.eval.metrics import aggregate, by_agent, case_table

# (label, how to read it from an aggregate, higher is better)
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("success rate", "success_rate", True),
    ("false done", "false_done", False),
    ("failed", "failed", False),
    ("errors", "errors", False),
    ("median steps", "steps.median", False),
    ("idle turns (total)", "idle_turns.sum", False),
    ("invalid calls (total)", "invalid_calls.sum", False),
    ("recovered calls (total)", "recovered_calls.sum", False),
    ("verification rounds (total)", "verification_rounds.sum", False),
    ("median prompt tokens", "prompt_tokens.median", False),
    ("median completion tokens", "completion_tokens.median", False),
    ("cached share", "cached_share", True),
    ("prefix reuse", "prefix_reuse", True),
    ("median wall s", "wall_s.median", False),
    ("cost $", "cost_usd", False),
)


def _read(agg: Mapping[str, Any], path: str) -> float | None:
    if "." in path:
        key, stat = path.split(".")
        dist = agg["distributions"].get(key)
        return float(dist[stat]) if dist else None
    value = agg.get(path)
    return float(value) if isinstance(value, int | float) else None


def compare(records_a: Sequence[Mapping[str, Any]], records_b: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    groups_a, groups_b = by_agent(records_a), by_agent(records_b)
    out: dict[str, Any] = {"agents": {}}
    for agent in [a for a in groups_a if a in groups_b]:
        rows_a, rows_b = groups_a[agent], groups_b[agent]
        shared = {r["case"]["id"] for r in rows_a} & {r["case"]["id"] for r in rows_b}
        # Deltas over the cases both runs have: a case missing from one side is listed, not averaged in.
        agg_a = aggregate([r for r in rows_a if r["case"]["id"] in shared])
        agg_b = aggregate([r for r in rows_b if r["case"]["id"] in shared])
        metrics = []
        for label, path, higher_better in METRICS:
            a, b = _read(agg_a, path), _read(agg_b, path)
            delta = None if a is None or b is None else round(b - a, 4)
            better = None if not delta else (delta > 0) == higher_better
            metrics.append({"metric": label, "a": a, "b": b, "delta": delta, "better": better})
        flips = []
        table_a, table_b = case_table(rows_a), case_table(rows_b)
        for cid in sorted(shared):
            ra, rb = table_a[cid][agent], table_b[cid][agent]
            wins_a = sum(r.get("outcome") == "success" for r in ra)
            wins_b = sum(r.get("outcome") == "success" for r in rb)
            fd_a = sum(r.get("outcome") == "false_done" for r in ra)
            fd_b = sum(r.get("outcome") == "false_done" for r in rb)
            rate_a, rate_b = wins_a / len(ra), wins_b / len(rb)
            if rate_a != rate_b or fd_a != fd_b:
                kind = "fixed" if rate_b > rate_a else "broke" if rate_b < rate_a else "false done changed"
                flips.append({"case": cid, "kind": kind, "a": f"{wins_a}/{len(ra)}", "b": f"{wins_b}/{len(rb)}",
                              "false_done_a": fd_a, "false_done_b": fd_b})
        out["agents"][agent] = {
            "repeats_a": max(int(r.get("repeat") or 1) for r in rows_a),
            "repeats_b": max(int(r.get("repeat") or 1) for r in rows_b),
            "cases": len(shared),
            "only_in_a": sorted({r["case"]["id"] for r in rows_a} - shared),
            "only_in_b": sorted({r["case"]["id"] for r in rows_b} - shared),
            "metrics": metrics, "flips": flips, "setup_differences": _setups(rows_a, rows_b),
        }
    out["only_agents_a"] = sorted(set(groups_a) - set(groups_b))
    out["only_agents_b"] = sorted(set(groups_b) - set(groups_a))
    return out


def _setups(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> list[str]:
    """How the serving setups of the two runs differ (keel.engine.provenance): the same model through
    another server, template, quantization or context size is another experiment. Within one run the
    first recorded setup stands for it; a run whose cases had several setups says so."""
    out: list[str] = []
    firsts = []
    for side, rows in (("A", rows_a), ("B", rows_b)):
        setups = {_setup_key(r["serving"]): r["serving"] for r in rows if r.get("serving")}
        if len(setups) > 1:
            out.append(f"run {side} itself mixes {len(setups)} setups")
        firsts.append(next(iter(setups.values()), None))
    return out + setup_differences(firsts[0], firsts[1])


def _setup_key(serving: Mapping[str, Any]) -> str:
    return repr([serving.get(k) for k in SETUP_FIELDS])


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"


def format_compare(result: Mapping[str, Any], name_a: str, name_b: str) -> str:
    lines: list[str] = []
    if not result["agents"]:
        return f"no agent has results in both {name_a} and {name_b}\n"
    for agent, data in result["agents"].items():
        lines.append(f"{agent}: {data['cases']} shared case(s); repeats A={data['repeats_a']} B={data['repeats_b']}"
                     f"   A = {name_a}   B = {name_b}")
        width = max(len(m["metric"]) for m in data["metrics"])
        lines.append(f"  {'metric':<{width}}  {'A':>12}  {'B':>12}  {'Δ (B-A)':>12}")
        for m in data["metrics"]:
            sign = "" if m["delta"] is None or m["delta"] <= 0 else "+"
            tag = {True: "  better", False: "  worse", None: ""}[m["better"]]
            lines.append(f"  {m['metric']:<{width}}  {_fmt(m['a']):>12}  {_fmt(m['b']):>12}  "
                         f"{sign + _fmt(m['delta']) if m['delta'] is not None else '–':>12}{tag}")
        if data["flips"]:
            lines.append(f"  flips ({len(data['flips'])}), successes per repeats:")
            for f in data["flips"]:
                fd = (f"  false done {f['false_done_a']} → {f['false_done_b']}"
                      if f["false_done_a"] != f["false_done_b"] else "")
                lines.append(f"    {f['kind']:<18} {f['case']}: {f['a']} → {f['b']}{fd}")
        else:
            lines.append("  no case changed outcome")
        for difference in data.get("setup_differences") or []:
            lines.append(f"  setups differ: {difference}")
        for side, key in (("A", "only_in_a"), ("B", "only_in_b")):
            if data[key]:
                lines.append(f"  only in {side}: {', '.join(data[key])}")
        lines.append("")
    for side, key in (("A", "only_agents_a"), ("B", "only_agents_b")):
        if result[key]:
            lines.append(f"agents only in {side}: {', '.join(result[key])}")
    return "\n".join(lines).rstrip() + "\n"
