"""How the project's checks stand before the agent changes anything, as a first-message section.

For a small model (the small profile, keel.tools.slim) the gate's checks run once before the first
turn and their failures go into the first message. Every bundled bug-fix case starts with a failing
test that names the bug (``assert shipping_cost(5000) == 0``); a 1.5B model that is only told
"shipping is charged at exactly $50" changed the threshold constant instead, and later spent turns
finding the test command. The run is also the gate's baseline, so it is not repeated at finish.
"""

from __future__ import annotations

from typing import Any

MAX_SUMMARY_CHARS = 1200


def render_checks_before(results: list[dict[str, Any]]) -> str:
    """Pure: ``results`` are CheckOutcome.to_json() dicts plus their ``summary``."""
    if not results:
        return ""
    lines = ["The project's checks now, before any change:"]
    for r in results:
        command = f"`{r['command']}`"
        if r.get("refused"):
            lines.append(f"- {command} could not run: {r['refused']}")
        elif r.get("passed"):
            lines.append(f"- {command} passes")
        else:
            status = "timed out" if r.get("timed_out") else f"fails (exit code {r.get('exit_code')})"
            lines.append(f"- {command} {status}")
            summary = (r.get("summary") or "").strip()
            if len(summary) > MAX_SUMMARY_CHARS:
                summary = summary[:MAX_SUMMARY_CHARS].rstrip() + "\n… (cut)"
            lines += ["    " + line for line in summary.splitlines() if line.strip()]
    return "\n".join(lines)


def checks_before(verifier: Any, emit: Any) -> str:
    """Run the gate's checks on the untouched workspace (its baseline); emit ``checks_before``;
    return the section. ``verifier`` is a keel.verify.verifier.Verifier."""
    if verifier.plan.empty:
        return ""
    facts = verifier.verify()
    results = [{**o.to_json(), "summary": o.summary} for o in facts.results]
    emit("checks_before", results=[{k: v for k, v in r.items() if k != "summary"} for r in results])
    return render_checks_before(results)
