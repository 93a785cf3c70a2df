"""The assists for small models, as one layer: each named, with the point where it acts, the profiles it
is on for, why it exists, and a switch.

An assist is something keel does *for* the model beyond the plain loop (call the model, run its tools,
judge a claim with the gate): showing the project's files in the first message, rewriting a whole file
from a note, sampling a refused reply differently, carrying a rename to other files … Each one came
from a measured failure of a 1.5B model, so each is on for the small profile only, unless a
measurement on a larger model shows it helps there too (none has yet: docs/local.md) — except the spec
probes, which are evidence for the gate rather than help for the model (see its entry).

``[assists]`` in the config switches them: one key per assist (``"auto"``: on for its profiles,
``true``: on for every profile, ``false``: off) and ``all = false`` to turn every one of them off.
Each site asks ``name in assists`` (an ``Assists``, built once per run by keel.agent) and, when it acts,
emits an ``assist`` event with the assist's name, so ``keel eval`` counts the times each one acted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SMALL = frozenset({"small"})


@dataclass(frozen=True)
class Assist:
    name: str
    family: str                  # switched off together by `keel eval --arms families`
    point: str                   # where it acts
    profiles: frozenset[str]     # on by default for these profiles
    reason: str                  # the measured failure it answers, in one line


ASSISTS: tuple[Assist, ...] = (
    Assist("preload", "first_message", "the first message", SMALL,
           "the 1.5B invented old_text for files it had not read; shown the files, it copies real text"),
    Assist("checks_before", "first_message", "the first message", SMALL,
           "told only the symptom, the 1.5B changed the wrong constant; the failing test names the bug"),
    Assist("whole_file_editor", "editor", "the tools (change_file)", SMALL,
           "in the loop the 1.5B copied a function into old_text unchanged; asked for the whole file it fixed 4 of 6"),
    Assist("editor_checks", "editor", "change_file, before a rewrite is written", SMALL,
           "the editor wrote a module with the test file's text, and a module that imported itself"),
    Assist("python_edit_undo", "editor", "edit_file, after an edit", SMALL,
           "new_text glued the old body onto the new signature; six turns went to an unimportable file"),
    Assist("expected_values", "editor", "change_file, a test file's rewrite when the task keeps the code", SMALL,
           "asked for tests of kept code, the 1.5B wrote is_leap_year(2023) == True; every rewrite failed on the code"),
    Assist("test_redirect", "redirect", "change_file on a test file or the task's spec document", SMALL,
           "refused a change to a test, the 1.5B sent it again four times; it follows a concrete next step"),
    Assist("callee_change", "cause", "change_file, when a rewrite left the checks failing", SMALL,
           "the bug was in the helper a module calls; the 1.5B changed the caller's constants four times"),
    Assist("call_trace", "cause", "change_file's editor request, when tests fail", SMALL,
           "parseDate read March as April; shown only dueDate's wrong result, the editor rewrote the wrong file 8 times"),
    Assist("put_back", "cause", "change_file, when the checks still fail after the run changed two code files", SMALL,
           "a guess (now: 0 -> 4) stayed, as it failed no more tests; once dates.js was fixed it was all that failed"),
    Assist("rename_spread", "refactor", "change_file, after a rewrite that renames", SMALL,
           "a rename stopped half-way: the constant was renamed in one file, never in its user"),
    Assist("moves", "refactor", "change_file, when the note asks for a move", SMALL,
           "asked to rename a module, the editor gave the file back unchanged three times"),
    Assist("candidates", "candidates", "change_file, when its rewrites leave the checks failing", SMALL,
           "a rewrite left the checks failing where a differently sampled one may pass: the gate tells which "
           "(not yet measured, issue 37)"),
    Assist("focus", "candidates", "change_file's candidates, when two or more tests fail", SMALL,
           "asked for the whole file against every failure at once, 8 of 8 candidates failed the same two tests"),
    Assist("again", "candidates", "change_file, when the model sends a change whose checks still fail again", SMALL,
           "after a round whose best rewrite passed 4 of 6 tests, the 1.5B sent the same change twice, refused as a repeat"),
    # Off for every profile: its A/B at bd2b06d acted twice on three cases and solved none (docs/local.md).
    Assist("claim_repair", "candidates", "the runner, when a claim is refused again with nothing changed",
           frozenset(), "after one change left a test failing, the 1.5B claimed done three times; 280 s unused"),
    Assist("variety", "variety", "the next request after a refused reply came again", SMALL,
           "at temperature 0 the same refused reply came back after every pushback until the run stopped"),
    Assist("reply_watch", "reply_watch", "the engine, as a reply streams", SMALL,
           "a reply restated its plan for 406 s up to the token cap"),
    Assist("contract_review", "spec", "the decider, on a claim", SMALL,
           "the tests passed where the comment's rule the task pointed at was not done (a false done)"),
    Assist("trial_calls", "spec", "the gate's pushback, on an all-clear answer to \"what is wrong\"", SMALL,
           "told to try the edge cases in its head, the 1.5B said \"correct\" three times; paginate(.., 1, 3) was [3, 4, 5]"),
    # On for every profile: a probe is evidence (a comment's example run, as an acceptance command is), and a
    # claim it refutes is a false done whatever the model; off with the rest under `all = false`.
    Assist("spec_probes", "spec", "the gate, on a claim", frozenset({"small", "full"}),
           "the comment's example and refused values, run, caught what the tests did not (chunk([1], 1.5))"),
)
NAMES: tuple[str, ...] = tuple(a.name for a in ASSISTS)
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(a.family for a in ASSISTS))
BY_NAME: dict[str, Assist] = {a.name: a for a in ASSISTS}


@dataclass(frozen=True)
class Assists:
    """The assists on for one run. ``name in assists`` is what each site asks."""

    on: frozenset[str]

    def __contains__(self, name: object) -> bool:
        if name not in BY_NAME:
            raise KeyError(f"no assist named {name!r}")   # a typo at a site must not read as "off"
        return name in self.on

    @classmethod
    def every(cls) -> Assists:
        """All of them: what a tool or verifier built outside an agent gets (the behaviour they were written with)."""
        return cls(frozenset(NAMES))

    @classmethod
    def none(cls) -> Assists:
        return cls(frozenset())

    def names(self) -> list[str]:
        """The assists that are on, in the registry's order."""
        return [n for n in NAMES if n in self.on]


def choose(profile: str, switches: Mapping[str, bool | str], *, everything: bool = True) -> Assists:
    """The assists on for ``profile``: each one's switch (``"auto"``: its profiles), none at all when
    ``everything`` is False."""
    if not everything:
        return Assists.none()
    on = set()
    for a in ASSISTS:
        switch = switches.get(a.name, "auto")
        if switch is True or (switch == "auto" and profile in a.profiles):
            on.add(a.name)
    return Assists(frozenset(on))


def family_members(families: Iterable[str]) -> set[str]:
    wanted = set(families)
    unknown = wanted - set(FAMILIES)
    if unknown:
        raise KeyError(f"no assist family {', '.join(sorted(unknown))} (families: {', '.join(FAMILIES)})")
    return {a.name for a in ASSISTS if a.family in wanted}


def parse_switches(spec: str) -> dict[str, bool | str]:
    """``keel run --assists SPEC`` as ``[assists]`` keys: ``off`` (all off), or ``NAME=on|off|auto`` pairs
    separated by commas, where NAME is an assist or a family (each of its assists). Raises ValueError
    naming what it does not know."""
    spec = spec.strip()
    if spec == "off":
        return {"all": False}
    values: dict[str, bool | str] = {"on": True, "true": True, "off": False, "false": False, "auto": "auto"}
    out: dict[str, bool | str] = {}
    for item in (part.strip() for part in spec.split(",") if part.strip()):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in values:
            raise ValueError(f"{item!r}: expected NAME=on|off|auto (or `off` alone for all of them)")
        if name in BY_NAME:
            out[name] = values[value]
        elif name in FAMILIES:
            out.update({n: values[value] for n in family_members([name])})
        else:
            raise ValueError(f"no assist or family named {name!r} (assists: {', '.join(NAMES)}; "
                             f"families: {', '.join(FAMILIES)})")
    return out
