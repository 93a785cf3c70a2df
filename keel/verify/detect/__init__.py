"""Detect a project's checks from its own files, and build the plan the gate runs.

``detect_checks`` asks every ecosystem detector (Python, JavaScript/TypeScript, Go, Rust, Makefile,
AGENTS.md, CI files) what it finds, then settles the result:

- **Precedence within a category.** A project that says how it wants to be checked is believed over
  keel's inference: commands named in AGENTS.md (source "agents_md") beat Makefile targets
  ("makefile"), which beat inferred commands ("inferred"). When a higher source has a *planned*
  check in a category, lower-source checks of that category are left out (listed as hints, so
  nothing disappears silently) and so are their skip notes. A higher-source command that cannot
  run (its tool is missing) covers nothing, and inference stands.
- **Dedupe** by command text (whitespace-normalised); the first, highest-ranked entry wins.
- **Order** by category (static → types → build → test), then by source rank, then detection order.

``build_plan`` adds acceptance checks (from the task text and ``--accept``), applies a pinned plan
from config (which replaces inference) and per-category switches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from keel.verify.detect.agents_md import detect_agents_md
from keel.verify.detect.ci import detect_ci
from keel.verify.detect.common import Findings, Which, workspace_which
from keel.verify.detect.go import detect_go
from keel.verify.detect.javascript import detect_javascript
from keel.verify.detect.makefile import detect_makefile
from keel.verify.detect.python import ModuleProbe, detect_python
from keel.verify.detect.rust import detect_rust
from keel.verify.plan import CATEGORY_ORDER, CheckSet, PlannedCheck, SkippedCheck

__all__ = ["build_plan", "detect_checks", "pinned_plan", "workspace_which"]

_SOURCE_RANK = {"agents_md": 0, "makefile": 1, "inferred": 2}
_SOURCE_LABEL = {"agents_md": "the agent instructions (AGENTS.md)", "makefile": "the Makefile"}


def _normalized(command: str) -> str:
    return " ".join(command.split())


def detect_checks(workspace: Path, *, which: Which | None = None,
                  has_module: ModuleProbe | None = None) -> CheckSet:
    """The checks the project's own files call for, each with its reason (see the module doc).

    ``which`` decides what is installed (default: the workspace's .venv/bin, venv/bin and
    node_modules/.bin, then PATH); ``has_module(interpreter, module)`` whether an interpreter can
    import a module (default: ask a system interpreter; a workspace virtualenv is inspected on disk,
    never run). Detection reads files and starts nothing from the workspace."""
    workspace = Path(workspace)
    found = Findings(workspace=workspace, which=which or workspace_which(workspace))
    detect_agents_md(workspace, found)
    detect_makefile(workspace, found)
    detect_python(workspace, found, has_module)
    detect_javascript(workspace, found)
    detect_go(workspace, found)
    detect_rust(workspace, found)
    detect_ci(workspace, found)
    return _settle(found)


def _settle(found: Findings) -> CheckSet:
    best: dict[str, int] = {}
    for check in found.checks:
        rank = _SOURCE_RANK.get(check.source, 2)
        best[check.category] = min(best.get(check.category, rank), rank)
    kept: list[PlannedCheck] = []
    hints: list[str] = []
    seen: set[str] = set()
    for check in found.checks:
        key = _normalized(check.command)
        if key in seen:
            continue
        seen.add(key)
        winner = best[check.category]
        if _SOURCE_RANK.get(check.source, 2) > winner:
            label = _SOURCE_LABEL[next(s for s, r in _SOURCE_RANK.items() if r == winner)]
            hints.append(f"`{check.command}` not planned: {label} names the {check.category} check")
            continue
        kept.append(check)
    kept.sort(key=lambda c: (CATEGORY_ORDER.index(c.category), _SOURCE_RANK.get(c.source, 2)))
    skipped: list[SkippedCheck] = []
    for source, skip in found.skipped:
        key = _normalized(skip.command)
        covered = _SOURCE_RANK.get(source, 2) > best.get(skip.category, 2)   # a higher source covers it
        if key in seen or covered:
            continue
        seen.add(key)
        skipped.append(skip)
    skipped.sort(key=lambda s: CATEGORY_ORDER.index(s.category))
    return CheckSet(checks=tuple(kept), skipped=tuple(skipped), hints=tuple(hints + found.hints))


PinnedEntry = Mapping[str, Any] | tuple[str, str] | PlannedCheck


def pinned_plan(entries: Iterable[PinnedEntry]) -> list[PlannedCheck]:
    """Checks pinned in config, taken as written: ``{category = "test", command = "make test"}``
    tables (``reason`` and ``timeout_s`` optional), ``(category, command)`` pairs, or PlannedChecks.

    Raises ValueError naming the bad entry, so a typo in config is reported instead of ignored."""
    checks: list[PlannedCheck] = []
    for number, entry in enumerate(entries, start=1):
        if isinstance(entry, PlannedCheck):
            checks.append(entry)
            continue
        fields: Mapping[str, Any] = (entry if isinstance(entry, Mapping)
                                     else dict(zip(("category", "command"), entry, strict=False)))
        category, command = fields.get("category"), fields.get("command")
        if category not in CATEGORY_ORDER:
            raise ValueError(f"pinned check {number}: category must be one of {', '.join(CATEGORY_ORDER)}, "
                             f"not {category!r}")
        if not isinstance(command, str) or not command.strip():
            raise ValueError(f"pinned check {number}: command must be a non-empty string")
        timeout = fields.get("timeout_s")
        checks.append(PlannedCheck(category=category, command=command.strip(),
                                   reason=str(fields.get("reason") or "pinned in the project's config"),
                                   source="config", timeout_s=float(timeout) if timeout is not None else None))
    return checks


def _same_command(a: str, b: str) -> bool:
    """`python test_app.py`, `python3 test_app.py` and `.venv/bin/python test_app.py` are one check."""
    def norm(command: str) -> list[str]:
        words = command.split()
        if words and words[0].rsplit("/", 1)[-1].startswith("python"):
            words[0] = "python"
        return words
    return norm(a) == norm(b)


def _runnable_python(check: PlannedCheck, which: Which) -> PlannedCheck:
    """Tasks say `python x.py`; where only python3 exists, run that (and say so) instead of failing."""
    words = check.command.split(maxsplit=1)
    if not words or words[0] != "python" or which("python") or not which("python3"):
        return check
    rest = f" {words[1]}" if len(words) > 1 else ""
    return PlannedCheck(category=check.category, command=f"python3{rest}", source=check.source,
                        reason=f"{check.reason}; run with python3 (no `python` is installed)",
                        protects=check.protects, timeout_s=check.timeout_s, expect_output=check.expect_output)


def build_plan(workspace: Path, task: str = "", accept: Iterable[str] = (),
               pinned: Iterable[PinnedEntry] | None = None,
               enabled: Mapping[str, bool] | None = None, which: Which | None = None,
               has_module: ModuleProbe | None = None) -> CheckSet:
    """The full plan: a pinned plan (when given — even empty — it replaces inference) or the
    detected one, plus acceptance checks from the task and ``--accept``.

    ``enabled`` maps categories to on/off (from config); a disabled category's checks move to
    ``skipped`` with a note. Acceptance checks are never dropped here: turning verification off
    entirely is the caller's decision. An inferred check that runs the same command as an
    acceptance check is dropped (the acceptance one carries the expected output)."""
    # Imported here: keel.verify.acceptance uses this package's command helpers.
    from keel.core.request import parse_request
    from keel.verify.acceptance import accept_checks, acceptance_checks

    workspace = Path(workspace)
    which = which or workspace_which(workspace)
    if pinned is not None:
        base = CheckSet(checks=tuple(pinned_plan(pinned)))
    else:
        base = detect_checks(workspace, which=which, has_module=has_module)
    acceptance: list[PlannedCheck] = []
    named = acceptance_checks(parse_request(task), workspace=workspace)
    for check in named + accept_checks(accept, workspace=workspace):
        check = _runnable_python(check, which)
        if not any(_same_command(check.command, a.command) for a in acceptance):
            acceptance.append(check)
    checks: list[PlannedCheck] = []
    skipped = list(base.skipped)
    for check in base.checks:
        if any(_same_command(check.command, a.command) for a in acceptance):
            continue
        if check.category != "acceptance" and enabled is not None and enabled.get(check.category) is False:
            skipped.append(SkippedCheck(check.category, check.command,
                                        f"the {check.category} category is turned off in config"))
            continue
        checks.append(check)
    return CheckSet(checks=tuple(checks + acceptance), skipped=tuple(skipped), hints=base.hints)
