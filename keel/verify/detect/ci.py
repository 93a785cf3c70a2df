"""CI workflow files as hints: the checks the project's CI runs, shown but never executed.

CI steps assume CI's environment (services, secrets, a fresh checkout, installed toolchains), so
running them here would be guessing. They are listed as hints so a person (or the model, via
pushback) can see what the project considers its checks. The files are read line by line — no YAML
parser is needed to find `run:` steps and GitLab `script:` lists, and a malformed file costs nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from keel.verify.detect.commands import categorize
from keel.verify.detect.common import Findings, read_text

_MAX_HINTS = 10
_RUN_KEY = re.compile(r"^(\s*(?:-\s+)?)(run|script|before_script):\s*(.*?)\s*$")
_BLOCK_MARKERS = {"|", ">", "|-", ">-", "|+", ">+", ""}


def workflow_files(workspace: Path) -> list[Path]:
    folder = workspace / ".github" / "workflows"
    files = sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")]) if folder.is_dir() else []
    gitlab = workspace / ".gitlab-ci.yml"
    return files + ([gitlab] if gitlab.is_file() else [])


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def run_commands(text: str) -> list[str]:
    """Command lines of `run:` steps (GitHub) and `script:` entries (GitLab), in file order."""
    commands: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _RUN_KEY.match(lines[i])
        i += 1
        if not match:
            continue
        indent, value = len(match.group(1)), match.group(3)   # the key's column, after any `- `
        if value.startswith("[") and value.endswith("]"):      # script: [a, b]
            commands += [_unquote(v) for v in value[1:-1].split(",") if v.strip()]
            continue
        if value not in _BLOCK_MARKERS:
            commands.append(_unquote(value))
            continue
        # A block scalar or a list: every following line indented deeper (or a `- item` at the key's level).
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            depth = len(line) - len(line.lstrip())
            if stripped and (depth < indent or (depth == indent and not stripped.startswith("- "))):
                break
            if stripped and not stripped.startswith("#"):
                commands.append(_unquote(stripped[2:]) if stripped.startswith("- ") else stripped)
            i += 1
    return commands


def detect_ci(workspace: Path, found: Findings) -> None:
    count = 0
    for path in workflow_files(workspace):
        rel = path.relative_to(workspace).as_posix()
        for command in run_commands(read_text(path) or ""):
            if count >= _MAX_HINTS:
                return
            if categorize(command) is not None:
                found.hint(f"{rel} runs `{command}` in CI (not run by keel)")
                count += 1
