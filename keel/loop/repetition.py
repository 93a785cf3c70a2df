"""Repetition detection: the same tool with the same arguments giving the same result.

A repeated call whose result changed (polling a clock, re-reading a file after an edit) is
progress. What the model is told is always what happened:

- a call whose identical predecessor changed files, with nothing changed since, is **not run**
  (running ``echo x >> notes`` twice would append twice); nor is a call already seen repeating
  with an identical result, with nothing changed since;
- a call whose tool said calling it again is another try (change_file after its rewrites left the
  checks failing: a repeat is sampled afresh, keel.drive.candidates.Rounds) runs;
- a call identical to an earlier call of the same reply is not run: one reply's calls run at most
  once each (a reply cut while repeating itself often holds the same call many times);
- otherwise the call runs; when its result is identical to the last one, the model is told that it
  ran again with the identical result.

Each such repeat is a strike; the decider stops the run at ``limits.max_repeats``. ``finish`` is
never a repeat: its answer is the decider's verdict, and finishing again after doing what keel
asked (running the checks) is what keel wants; an identical finish with nothing done in between is
only not progress.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

# Calls whose "result" is the decider's verdict, not a tool's: never struck as repeats.
UNGUARDED = frozenset({"finish"})


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


@dataclass(frozen=True)
class _Seen:
    digest: str               # the result it gave
    change_seq: int           # the guard's change count right after it ran
    changed: tuple[str, ...]  # files it changed
    again: bool = False       # its tool said a repeat is another try, not the same answer


@dataclass(frozen=True)
class Skip:
    """A call the guard answers without running it: the text for the model and the strike count."""

    text: str
    strikes: int


@dataclass
class RepetitionGuard:
    seen: dict[str, _Seen] = field(default_factory=dict)
    strikes: dict[str, int] = field(default_factory=dict)
    last_finish: tuple[str, int] | None = None   # (arguments key, tool calls so far) of the last finish
    changes: int = 0   # calls so far that changed (or may have changed) the workspace

    def before(self, name: str, arguments: str, earlier_in_reply: int | None = None, *,
               strike: bool = True) -> Skip | None:
        """Whether this call must not run (see the module doc); None: run it. A skip is a strike unless
        ``strike`` is False (only asking).

        ``earlier_in_reply``: the 1-based position of an identical call earlier in the same reply."""
        if name in UNGUARDED:
            return None
        key = canonical_call(name, arguments)
        prior = self.seen.get(key)
        if earlier_in_reply is not None:
            text = _duplicate_text(name, earlier_in_reply)
        elif prior is None or prior.change_seq != self.changes:
            return None   # new, or something changed since: running it may give a new answer
        elif prior.again:
            return None   # its tool samples afresh: a repeat may give a new answer too
        elif prior.changed or self.strikes.get(key):
            text = _not_rerun_text(name, prior.changed)
        else:
            return None
        return Skip(text, self._strike(key) if strike else self.strikes.get(key, 0) + 1)

    def observe(self, name: str, arguments: str, result_text: str, changed: list[str] | tuple[str, ...] = (),
                *, maybe_changed: bool = False, again: bool = False) -> int:
        """Record a call that ran; return how many times this exact (call, result) repeated (0 = new).

        ``changed``: the files it is known to have changed; ``maybe_changed``: it may have changed
        files nobody reported (a tool of unknown effect), so nothing earlier counts as current; ``again``:
        the tool said calling it again is another try."""
        if changed or maybe_changed:
            self.changes += 1
        if name in UNGUARDED:
            return 0
        key = canonical_call(name, arguments)
        digest = _digest(result_text)
        prior = self.seen.get(key)
        self.seen[key] = _Seen(digest, self.changes, tuple(changed), again)
        if prior is not None and prior.digest == digest and not changed:
            return self._strike(key)
        self.strikes.pop(key, None)
        return 0

    def finish_is_new(self, arguments: str, calls_so_far: int) -> bool:
        """False for a finish identical to the last one with no other call in between: no progress."""
        mark = (canonical_call("finish", arguments), calls_so_far)
        previous, self.last_finish = self.last_finish, (mark[0], calls_so_far + 1)
        return previous != mark

    def _strike(self, key: str) -> int:
        self.strikes[key] = self.strikes.get(key, 0) + 1
        return self.strikes[key]


_CHANGE_APPROACH = ("Change approach: use different arguments, a different tool, or act on the result you "
                    "already have.")


def ran_again_text(name: str) -> str:
    """For a repeat that ran: it did run, and gave what it gave before."""
    return (f"This ran again: you already called {name} with these exact arguments, and it gave the identical "
            f"result (shown earlier, not repeated here). Repeating it will not change anything. {_CHANGE_APPROACH}")


def _not_rerun_text(name: str, changed: tuple[str, ...]) -> str:
    if changed:
        files = ", ".join(changed[:5]) + (" …" if len(changed) > 5 else "")
        why = (f"it changed {files}, and nothing has changed since, so running it again would only repeat that "
               "change")
    else:
        why = "it gave the identical result each time, and nothing has changed since"
    return (f"Not run: you already called {name} with these exact arguments; {why}. Its result is shown earlier. "
            f"{_CHANGE_APPROACH}")


def _duplicate_text(name: str, position: int) -> str:
    return (f"Not run: call {position} of this same reply is this exact {name} call; it ran once and its result "
            "is shown with it. Make each call once.")
