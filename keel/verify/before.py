"""How the project's checks stand before the agent changes anything, as a first-message section.

For a small model (the small profile, keel.tools.small) the gate's checks run once before the first
turn and their failures go into the first message. Every bundled bug-fix case starts with a failing
test that names the bug (``assert shipping_cost(5000) == 0``); a 1.5B model that is only told
"shipping is charged at exactly $50" changed the threshold constant instead, and later spent turns
finding the test command. The run is also the gate's baseline, so it is not repeated at finish.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from keel.verify.gate import CheckOutcome

MAX_SUMMARY_CHARS = 1200


def render_checks_before(results: Sequence[CheckOutcome]) -> str:
    """Pure: the section for ``results``, the gate's outcomes on the untouched workspace."""
    if not results:
        return ""
    lines = ["The project's checks now, before any change:"]
    for o in results:
        command = f"`{o.check.command}`"
        if o.refused:
            lines.append(f"- {command} could not run: {o.refused}")
        elif o.passed:
            lines.append(f"- {command} passes")
        else:
            status = "timed out" if o.timed_out else f"fails (exit code {o.exit_code})"
            lines.append(f"- {command} {status}")
            summary = o.summary.strip()
            if len(summary) > MAX_SUMMARY_CHARS:
                summary = summary[:MAX_SUMMARY_CHARS].rstrip() + "\n… (cut)"
            lines += ["    " + line for line in summary.splitlines() if line.strip()]
    return "\n".join(lines)


def checks_before(verifier: Any, emit: Any) -> str:
    """Run the gate's checks on the untouched workspace (its baseline); emit ``checks_before``;
    return the section. ``verifier`` is a keel.verify.verifier.Verifier."""
    if verifier.request.answer_only or verifier.plan.empty:
        return ""      # a question runs no check (docs/verification.md), and nothing to run shows nothing
    began = time.monotonic()
    facts = verifier.verify()
    emit("checks_before", results=[o.to_json() for o in facts.results], elapsed_s=round(time.monotonic() - began, 3))
    return render_checks_before(facts.results)
