"""Repetition detection: the same tool with the same arguments giving the same result.

A repeated call whose result changed (polling a job, re-reading a file after an edit) is
progress. Only an identical (call, result) pair is a repeat; the first repeat is refused with
a message telling the model to change approach, and the decider stops the run on the next.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


def canonical_call(name: str, arguments: str) -> str:
    """A key that ignores key order and whitespace in the arguments."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
        args = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    except (json.JSONDecodeError, TypeError):
        args = arguments.strip()
    return f"{name}\x00{args}"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


@dataclass
class RepetitionGuard:
    last_result: dict[str, str] = field(default_factory=dict)
    strikes: dict[str, int] = field(default_factory=dict)

    def observe(self, name: str, arguments: str, result_text: str) -> int:
        """Record a call's result; return how many times this exact (call, result) repeated (0 = new)."""
        key = canonical_call(name, arguments)
        digest = _digest(result_text)
        if self.last_result.get(key) == digest:
            self.strikes[key] = self.strikes.get(key, 0) + 1
            return self.strikes[key]
        self.last_result[key] = digest
        self.strikes.pop(key, None)
        return 0


def refusal_text(name: str) -> str:
    return (f"Refused: you already called {name} with these exact arguments and got the identical result. "
            "Repeating it will not change anything. Change approach: use different arguments, a different "
            "tool, or act on the result you already have.")
