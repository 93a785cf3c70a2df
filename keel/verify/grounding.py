"""Does an answer rest on the project it is about? The gate's rules for an answer's words (keel.verify.answer
reads them), given the workspace.

An answer to a request about the project at hand ("what does this project do?", or one that names its
files or functions) must name something of it: a path, a definition, a word of a module's docstring or of
the README's title. It must not report a change when nothing changed. And when the request says something
fails, an answer that blames an exception the failing checks never show is contradicted by them. Measured
on the 1.5B with the assists off (docs/local.md, the suite at be12010): three questions were answered with
words that fail these rules and were taken as answers, false dones all three.

A request about programming at large ("what is a tuple?") names nothing of the project and is not held to
the first rule: its answer need not name the project.

Pure: the snapshot and the check outcomes come in as arguments.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from keel.context.outline import language_of, outline
from keel.core.request import Request
from keel.verify.answer import errors_blamed, names_project, only_anatomy, project_stems, reports_change
from keel.verify.gate import CheckOutcome
from keel.verify.snapshot import Snapshot

MAX_FILES = 400          # outlined files: a big repository is named by its first ones (sorted paths)
MAX_CHARS = 200_000      # a file bigger than this is named by its path alone
# The first line of a module's docstring, or of its leading comment (Python, JavaScript).
_LEAD = re.compile(r'\A(?:\s*#![^\n]*\n)?\s*(?:[rRuU]?(?:"""|\'\'\')\s*|/\*\*?\s*\*?\s*|//\s*|#\s*)([^\n]*)')
_HEADING = re.compile(r"^#+\s+(.+)$|^(\S[^\n]*)\n[=-]{3,}\s*$", re.MULTILINE)


def _names(snap: Snapshot) -> tuple[list[str], list[str]]:
    """What the project calls itself: (paths and definitions with their parameters, the first line of each
    module's docstring and the README's title)."""
    names, described = list(sorted(snap.files)[: MAX_FILES * 4]), []
    shown = 0
    for path in sorted(snap.files):
        text = snap.text(path)
        if text is None or len(text) > MAX_CHARS:
            continue
        if PurePosixPath(path).stem.lower() == "readme" and (title := _HEADING.search(text)):
            described.append(title.group(1) or title.group(2) or "")
        if language_of(path) is None or shown >= MAX_FILES:
            continue
        shown += 1
        if lead := _LEAD.match(text):
            described.append(lead.group(1))
        shape = outline(path, text)
        for d in shape.definitions if shape else ():
            names.append(d.signature)   # its parameters too: "page * per_page" names paginate(items, page, per_page)
            names += [m.signature for m in d.members]
    return names, described


def is_about_project(request: Request, snap: Snapshot, names: Sequence[str]) -> bool:
    """The request speaks of the project, or names one of its files or definitions (``names``)."""
    if request.about_project or any(f in snap.files or any(p.endswith(f"/{f}") for p in snap.files)
                                    for f in request.files):
        return True
    named = set(request.functions) | request.identifiers
    return bool(named) and bool(project_stems(named) & project_stems(names))


def answer_gap(request: Request, snap: Snapshot, claim: str) -> str:
    """Why an answer, with the workspace unchanged, does not rest on the project: "reports_change" (it says
    a change was made), "ungrounded" (asked about the project, it names nothing of it), "lists_parts" (asked
    what it does, it only names its files and definitions), or ""."""
    if reports_change(claim):
        return "reports_change"
    names, described = _names(snap)
    if not is_about_project(request, snap, names):
        return ""
    project = project_stems([*names, *described])
    if project and not names_project(claim, project):
        return "ungrounded"
    if project and request.asks_purpose and only_anatomy(claim, project_stems(names)):
        return "lists_parts"
    return ""


_ID_PART = re.compile(r"[\s/:.()\[\]_-]+")


def speaks_of(request: Request, outcome: CheckOutcome) -> bool:
    """Whether the request speaks of this failing check: it names one of its failing tests, or a part of
    one's name (``test_calc.py::test_add`` by "test_add" or "add()"). An answer about why parse() crashes
    is not held to an unrelated test's failure."""
    words = {w.lower() for w in re.findall(r"[^\W_]+", request.text)}
    return any(part.lower() in words for test in outcome.failing_tests for part in _ID_PART.split(test)
               if len(part) >= 3 and part.lower() not in {"test", "tests", "py", "js", "spec"})


def project_files(snap: Snapshot, limit: int = 12) -> str:
    """Some of the project's files, code first, for a pushback that asks the answer to name them."""
    ranked = sorted(snap.files, key=lambda p: (language_of(p) is None, p.count("/"), p))
    more = f", … {len(ranked) - limit} more" if len(ranked) > limit else ""
    return "The project's files: " + ", ".join(ranked[:limit]) + more


def unshown_errors(claim: str, failing: Sequence[CheckOutcome], outputs: Sequence[str]) -> tuple[str, ...]:
    """The exceptions the answer blames that no failing check shows (its summary, details, saved output)."""
    if not failing:
        return ()
    seen = " ".join([*(o.summary for o in failing), *(t for o in failing for _, t in o.details), *outputs])
    return tuple(sorted(e for e in errors_blamed(claim) if e not in seen))


__all__ = ["answer_gap", "is_about_project", "project_files", "speaks_of", "unshown_errors"]
