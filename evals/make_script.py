"""Write a case's script.jsonl from its repo/ and solution/: the reference trajectory for --engine scripted.

    python evals/make_script.py evals/<id> [evals/<id> ...]

The trajectory is what a careful agent would do: read every file it will change, change them with
edit_file (whole-line hunks with enough context to be unique, so the text matches the repository
exactly) or write_file for new files, delete what solution/.delete lists, run the case's first
acceptance command, and finish. Hand-written scripts (wrong first attempts, detours) are welcome
too; this is only the quick way to a correct one after changing a case's files.
"""

from __future__ import annotations

import difflib
import json
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any


def files_under(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".delete"}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def hunk_edits(old: str, new: str) -> list[dict[str, str]]:
    """Whole-line replacements turning ``old`` into ``new``, each old_text unique in ``old``."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for context in range(0, max(len(a), 1) + 1):
        edits = []
        for group in matcher.get_grouped_opcodes(context):
            i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
            edits.append({"old_text": "".join(a[i1:i2]), "new_text": "".join(b[j1:j2])})
        if all(e["old_text"] and old.count(e["old_text"]) == 1 for e in edits):
            return edits
    return []  # only when old is empty: write the whole file instead


def build(case_dir: Path) -> list[dict[str, Any]]:
    case = tomllib.loads((case_dir / "case.toml").read_text(encoding="utf-8"))
    repo, solution = files_under(case_dir / "repo"), files_under(case_dir / "solution")
    delete_list = case_dir / "solution" / ".delete"
    deleted = [line.strip() for line in delete_list.read_text().splitlines()
               if line.strip()] if delete_list.is_file() else []
    changed = [p for p, text in solution.items() if p in repo and repo[p] != text]
    created = [p for p in solution if p not in repo]
    to_read = changed + [d for d in deleted if d not in changed]
    if not to_read:  # only new files (e.g. new tests): read the code they are about
        to_read = [p for p in case["acceptance"].get("must_not_change", []) if p in repo][:2]
    reads = [call("read_file", path=p) for p in to_read]
    changes: list[dict[str, Any]] = []
    for path in changed:
        edits = hunk_edits(repo[path], solution[path])
        if not edits:
            changes.append(call("write_file", path=path, content=solution[path]))
        elif len(edits) == 1:
            changes.append(call("edit_file", path=path, **edits[0]))
        else:
            changes.append(call("edit_file", path=path, edits=edits))
    changes += [call("write_file", path=p, content=solution[p]) for p in created]
    if deleted:
        changes.append(call("run_shell", command="rm " + " ".join(shlex.quote(d) for d in deleted)))
    check = case["acceptance"]["commands"][0]
    steps: list[dict[str, Any]] = []
    if reads:
        steps.append({"content": "Let me read the code first.", "tool_calls": reads})
    steps.append({"tool_calls": changes})
    steps.append({"tool_calls": [call("run_shell", command=check)]})
    steps.append({"tool_calls": [call("finish", summary=f"{case['title']}. `{check}` passes.")]})
    return steps


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for arg in argv:
        case_dir = Path(arg)
        steps = build(case_dir)
        text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in steps)
        (case_dir / "script.jsonl").write_text(text, encoding="utf-8")
        print(f"{case_dir}: {len(steps)} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
