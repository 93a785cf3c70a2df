"""Allow only on positive knowledge: every option a command gets must be on its list of known-safe
options, spelled exactly (docs/policy.md, section 5).

The lists live in ``facts.toml`` (read by ``facts.py``), one per command (``git log``, ``go run`` and
``python -m pytest`` have their own). An option not on the list — an abbreviation (``--outp`` for ``--output``), an
unknown option, an unknown ``--opt=value`` form, an option built at run time (``ls $OPTS``) —
asks. A command without a list knows no options at all. What an option's value names is judged
too: ``--output=F``-style options are marked ``=W`` and their value is judged as a write.

Shell builtins whose judges read every flag that matters (``declare -n``, ``set -k``,
``read``/``printf -v``, ``hash -p``) and that open no files are not listed here (``FREE``).
"""

from __future__ import annotations

import glob as globbing
import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from keel.policy.shell.commands import Finding, Invocation, ask, judge_write
from keel.policy.shell.facts import parse, resolve
from keel.policy.shell.parse import Word

if TYPE_CHECKING:
    from keel.policy.shell.commands import JudgeEnv


def _glob_options(env: JudgeEnv, inv: Invocation, args: list[Word]) -> str | None:
    """``sort *`` with a file named ``--output=…`` in the directory: the glob becomes an option."""
    for word in args:
        if word.value == "--":
            return None
        name = word.value.rpartition("/")[2]
        if not word.glob or name[:1] not in ("*", "?", "["):
            continue
        if env.paths.dash_names:
            return f"the glob {word.value!r} may match a file this line names with a leading '-' (an option)"
        for cwd in inv.cwds:
            base = Path(word.value) if word.value.startswith("/") else (cwd or Path("/nonexistent")) / word.value
            if cwd is None or any(Path(m).name.startswith("-") for m in itertools.islice(
                    globbing.iglob(str(base), include_hidden=True), 2000)):
                return f"the glob {word.value!r} matches a file whose name starts with '-' (an option)"
    return None


def known_options(env: JudgeEnv, inv: Invocation) -> list[Finding]:
    """Ask unless every option is on the command's list; judge the paths ``=W`` options write."""
    found = resolve(inv.argv)
    if found is None:
        return []
    key, spec, args = found
    result = parse(spec, args)
    out: list[Finding] = [ask(f"{key}: {why}")] if (why := _glob_options(env, inv, args)) else []
    for name, target in result.writes:
        if name.startswith("config "):
            if any(p.where not in ("inside", "root") for p in env.paths.places(target, inv.cwds)):
                out.append(ask(f"{key} {name[7:]} {target.value!r}: configuration from outside the workspace "
                               "(it can load plugins)"))
        else:
            out += judge_write(env, target, inv.cwds, verb=f"{key} {name} writes")
    if result.problem:
        out.append(ask(f"{key}: {result.problem}"))
    return out
