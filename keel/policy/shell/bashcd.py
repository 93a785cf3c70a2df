"""Where ``cd`` leads, resolved the way bash resolves it, and the policy's own budget.

bash's ``cd`` is not ``chdir(realpath(cwd/dir))``:

- **logical paths** (the default, ``cd -L``): ``cd ..`` after ``cd link`` goes to the directory
  holding *the link*, not the target's parent; the physical resolution the kernel does for every
  other command differs, so each physical working directory remembers the logical path bash
  keeps in ``$PWD``;
- **CDPATH**: ``cd name`` (not starting with ``/``, ``./`` or ``../``) searches ``$CDPATH`` first;
  when CDPATH may be set (inherited, or touched anywhere on the line) such a target is unknown;
- **cdable_vars**: ``shopt -s cdable_vars`` makes ``cd NAME`` go to ``$NAME`` when ``./NAME`` is not
  a directory: unknown too;
- ``set -P`` / ``set -o physical`` switch to physical resolution: when the line may do that,
  both readings are kept.

The budget bounds the policy's own time and memory (a crafted command must not make the judge
run for minutes): too many working directories collapse to "unknown"; a variable value longer
than ``parse.MAX_VALUE`` is unknown; past the wall-clock deadline the verdict is "ask".
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from keel.policy.shell.parse import Cwds, Word

MAX_CWDS = 16            # more possible working directories than this: the directory is unknown
TIME_BUDGET = 1.0        # CPU seconds of judging per command line
TOO_COMPLEX = "this command is too complex to judge in time"


class TooComplex(Exception):
    """The policy's budget ran out: the verdict is "ask" with TOO_COMPLEX as the reason."""


@dataclass
class Budget:
    # CPU time of the judging thread, not wall time: a loaded machine must not turn "allow" into "ask".
    deadline: float = field(default_factory=lambda: time.thread_time() + TIME_BUDGET)

    def check(self) -> None:
        if time.thread_time() > self.deadline:
            raise TooComplex(TOO_COMPLEX)


def cap(cwds: Cwds) -> Cwds:
    """State merging: a set of directories too large to follow is one unknown directory."""
    return frozenset({None}) if len(cwds) > MAX_CWDS else cwds


@dataclass
class CdModel:
    """What the line (and the environment) may do to ``cd``."""

    source: str
    home: Path
    start: Cwds
    logical: dict[Path, Path | None] = field(default_factory=dict)   # physical -> $PWD (None: ambiguous)

    def __post_init__(self) -> None:
        self.logical.update({cwd: cwd for cwd in self.start if cwd is not None})
        self.cdpath = "CDPATH" in os.environ or "CDPATH" in self.source
        self.cdable = "cdable_vars" in self.source or "cdable_vars" in os.environ.get("BASHOPTS", "")
        # `set -P`, `set -o physical`, `set -eP` ...: the line may switch cd to physical paths
        self.maybe_physical = bool(re.search(r"physical|\bset\b[^;&|\n]*\s[-+]\w*P", self.source))

    def resolve(self, words: list[Word], cwds: Cwds) -> Cwds:
        """The directories ``cd``/``pushd`` with these words (after the name) may lead to."""
        physical = False
        operands: list[Word] = []
        for word in words:
            if word.value.startswith("-") and word.value != "-" and not operands:
                physical = "P" in word.value if set(word.value[1:]) <= set("LPe@") else physical
                continue
            operands.append(word)
        if not operands:
            return frozenset({self.home})
        target = operands[0]
        if not target.literal or target.value == "-" or target.glob or target.brace \
                or target.value.startswith(("~+", "~-")):
            return frozenset({None})
        value = os.path.expanduser(target.value) if target.value.startswith("~") else target.value
        searched = not value.startswith("/") and value.split("/", 1)[0] not in (".", "..")
        if value and searched and self.cdpath:
            return frozenset({None})
        result: set[Path | None] = set()
        for cwd in cwds:
            if cwd is None:
                result.add(None)
                continue
            if self.cdable and searched and not os.path.isdir(cwd / value):
                result.add(None)
                continue
            if physical or self.maybe_physical:
                result.add(Path(os.path.realpath(cwd / value)))
            if not physical:
                result.add(self._logical(cwd, value))
        return cap(frozenset(result))

    def _logical(self, cwd: Path, value: str) -> Path | None:
        base = self.logical.get(cwd, cwd)
        if base is None:                  # reached by more than one logical path
            return None if ".." in value.split("/") else Path(os.path.realpath(cwd / value))
        lexical = Path(os.path.normpath(base / value))
        if not os.path.isdir(lexical):
            # bash falls back to the physical path when the canonical one is not a directory
            return Path(os.path.realpath(cwd / value))
        real = Path(os.path.realpath(lexical))
        known = self.logical.get(real, lexical)
        self.logical[real] = lexical if known == lexical else None
        return real
