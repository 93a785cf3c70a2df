"""Never the same reply twice: when the model sends again a reply keel already turned down, the
next request is sampled differently.

At temperature 0 a small model answers the same prompt with the same reply, and a pushback or a
tool result that changes a few words of the prompt often does not move it: one run sent the same
runaway change_file four times, each cut as "repeating"; another got the same reply to every
pushback until limit:no_progress. Each such reply spends a step and its tokens on nothing.

keel remembers a fingerprint of every reply it turned down in this run (refused by the decider,
struck as a repeat, invalid, or cut short) and, when a reply that was turned down again matches
one of them, asks the engine for a *variant* request next (keel.engine.types.variant_sampling):
a higher temperature and a seed of its own, and the tools that reply called taken out of the
reply's choices for that one request (``avoid``). Temperature alone was not enough: on the 1.5B
model a 0.5 sample sent the same change_file of a protected test a third time, and the repetition
limit ended the run. The tools stay in the prompt (the in-process engine keeps its cached prefix);
only what the reply may call narrows. The count grows with every such repeat, so each retry gets a
new seed. Nothing else changes: the same messages, pushback and limits.

Pure: facts in, decision out; the table tests in tests/test_variety.py cover every branch.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from keel.engine.types import variant_sampling
from keel.loop.repetition import canonical_call

# Why a reply was turned down, in the order one is named when several apply.
CUT, REFUSED, STRUCK, INVALID = "cut", "refused", "struck", "invalid"
_WHY = {CUT: "repeats a cut reply", REFUSED: "repeats a refused reply",
        STRUCK: "repeats a reply struck as a repeat", INVALID: "repeats an invalid reply"}

_SPACE = re.compile(r"\s+")
# The tool a call names, in the forms a reply cut short may hold: JSON ("name": "change_file") or
# Qwen3-Coder's XML (<function=change_file>).
_NAMED = re.compile(r'"name"\s*:\s*"([A-Za-z_][\w.-]{0,63})"|<function=([A-Za-z_][\w.-]{0,63})>')
CUT_HEAD_CHARS = 400   # where a cut reply's call names its tool


def fingerprint(content: str, calls: Iterable[tuple[str, str]]) -> str:
    """One reply's identity: its text with whitespace runs collapsed, and each tool call as name
    and canonical JSON arguments (key order and spacing ignored), in order."""
    parts = [_SPACE.sub(" ", content).strip(), *(canonical_call(name, args) for name, args in calls)]
    return hashlib.sha1("\x01".join(parts).encode("utf-8", "replace")).hexdigest()


def called_in_cut(content: str, offered: Iterable[str]) -> list[str]:
    """The offered tools a reply cut short was calling, read from its start (a cut call is never parsed
    into a tool call). Measured on the 1.5B model (py-write-tests): the same runaway change_file was cut
    four times in a row, the last two at temperature 0.5 with seeds of their own; the variant must take
    that tool away as it does for a call that was parsed."""
    names = set(offered)
    found: list[str] = []
    for m in _NAMED.finditer(content[:CUT_HEAD_CHARS]):
        name = m.group(1) or m.group(2)
        if name in names and name not in found:
            found.append(name)
    return found


def called_tools(parsed: Iterable[str], content: str, why: str | None, offered: Iterable[str]) -> list[str]:
    """The tools a reply called: its parsed calls' names, or for a reply cut short those in its text."""
    names = list(parsed)
    return names or (called_in_cut(content, offered) if why == CUT else [])


def turned_down(*, cut: bool, pushed_back: bool, struck: bool, invalid: bool, progress: bool) -> str | None:
    """Why keel turned this reply down (CUT, REFUSED, STRUCK, INVALID), or None if it did not.

    A struck or invalid call turns the reply down only when nothing else in it made progress: a
    reply that also did something new was not wasted."""
    if cut:
        return CUT
    if pushed_back:
        return REFUSED
    if progress:
        return None
    if struck:
        return STRUCK
    if invalid:
        return INVALID
    return None


@dataclass(frozen=True)
class Variant:
    """What the next request asks of the engine: ``n`` 0 is a normal request."""

    n: int = 0
    why: str = ""
    avoid: tuple[str, ...] = ()   # tools the reply may not call, sorted


NORMAL = Variant()


def next_variant(print_: str, why_now: str | None, earlier: Mapping[str, str], repeats: int,
                 called: Iterable[str] = (), offered: Iterable[str] = ()) -> Variant:
    """The variant for the next request, after a reply with fingerprint ``print_`` that was turned
    down for ``why_now`` (None: it was not). ``earlier``: fingerprint -> why ("" when it went
    through), of the replies before it in this run; ``repeats``: variant requests asked for so far;
    ``called``: the tools that reply called, avoided next unless that leaves none of ``offered``.

    Only a reply turned down counts: one that matches an earlier reply but went through this time
    (the workspace changed in between) wasted nothing. An earlier reply that went through counts
    too: measured on the 1.5B model, a read that ran, then the same read twice, each struck as a
    repeat, ended the run at the repetition limit before a variant could be asked for."""
    if why_now is None or print_ not in earlier:
        return NORMAL
    avoid = tuple(sorted(set(called)))
    if not set(offered) - set(avoid):
        avoid = ()   # a reply must be able to call something
    return Variant(repeats + 1, _WHY.get(earlier[print_], "repeats an earlier reply"), avoid)


@dataclass
class Variety:
    """The run's memory of its replies (fingerprint -> why it was turned down, "" if it was not) and
    of the variant requests asked for so far."""

    offered: frozenset[str] = frozenset()   # the tools the run offers
    rejected: dict[str, str] = field(default_factory=dict)
    repeats: int = 0

    def after_reply(self, print_: str, why_now: str | None, called: Iterable[str] = ()) -> Variant:
        """Judge one reply (its fingerprint, why it was turned down, the tools it called): the next
        request's variant."""
        variant = next_variant(print_, why_now, self.rejected, self.repeats, called, self.offered)
        if why_now is not None or print_ not in self.rejected:
            # the first reason a reply was turned down is the one a repeat names
            self.rejected[print_] = why_now or self.rejected.get(print_) or ""
        self.repeats = max(self.repeats, variant.n)
        return variant


def variant_json(variant: Variant, temperature: float | None, seed: int | None) -> dict[str, object] | None:
    """The ``variant`` field of a model_call event (docs/events.md), from the engine's configured
    sampling (None when the engine has none: a scripted model), or None for a normal request."""
    if not variant.n:
        return None
    avoid = {"avoid": list(variant.avoid)} if variant.avoid else {}
    if temperature is None:
        return {"n": variant.n, "why": variant.why, "temperature": None, "seed": None, **avoid}
    temp, varied_seed = variant_sampling(temperature, seed, variant.n)
    return {"n": variant.n, "why": variant.why, "temperature": temp, "seed": varied_seed, **avoid}
