"""JavaScript/TypeScript: package.json scripts through the package manager the lockfile names, and tsc.

Only scripts the project defines are run, never guessed tools (an `eslint` binary without a lint
script says nothing about how the project wants it run). The package manager follows the
lockfile, because running npm in a pnpm workspace resolves different dependencies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from keel.verify.detect.common import Findings, read_text
from keel.verify.plan import Category

# Script names per category, first match wins.
_SCRIPTS: tuple[tuple[Category, tuple[str, ...]], ...] = (
    ("static", ("lint",)),
    ("types", ("typecheck", "type-check", "tsc", "check-types", "types")),
    ("build", ("build",)),
    ("test", ("test",)),
)
_LOCKFILES = (("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn"), ("package-lock.json", "npm"),
              ("npm-shrinkwrap.json", "npm"))
# `npm init` writes this placeholder; it fails on purpose and tests nothing.
_PLACEHOLDER_TEST = re.compile(r"no test specified", re.IGNORECASE)
_WATCH = re.compile(r"--watch\b|(?:^|\s)(?:nodemon|vitest\s+watch)\b")


def _package_manager(workspace: Path, package: dict[str, Any]) -> tuple[str, str]:
    """(manager, why): the lockfile decides; then the `packageManager` field; npm by default."""
    for lockfile, manager in _LOCKFILES:
        if (workspace / lockfile).is_file():
            return manager, f"{lockfile} → {manager}"
    declared = package.get("packageManager")
    if isinstance(declared, str) and declared.split("@", 1)[0] in {"npm", "pnpm", "yarn"}:
        manager = declared.split("@", 1)[0]
        return manager, f'package.json "packageManager" → {manager}'
    return "npm", "no lockfile → npm"


def script_command(manager: str, script: str) -> str:
    # `npm test` / `pnpm test` / `yarn test` are built-in shorthands; other scripts need `run`.
    return f"{manager} test" if script == "test" else f"{manager} run {script}"


def _load_package(workspace: Path, found: Findings) -> dict[str, Any] | None:
    text = read_text(workspace / "package.json")
    if text is None:
        return None
    try:
        package = json.loads(text)
    except json.JSONDecodeError as e:
        found.hint(f"package.json does not parse ({e}); its scripts were not read")
        return None
    return package if isinstance(package, dict) else None


def detect_javascript(workspace: Path, found: Findings) -> None:
    package = _load_package(workspace, found)
    if package is None:
        if (workspace / "tsconfig.json").is_file():
            found.tool("types", "tsc", "--noEmit", "tsconfig.json exists")
        return
    raw_scripts = package.get("scripts")
    scripts = {k: v for k, v in raw_scripts.items() if isinstance(v, str)} if isinstance(raw_scripts, dict) else {}
    manager, manager_why = _package_manager(workspace, package)
    manager_at = found.which(manager)
    has_types_script = False
    for category, names in _SCRIPTS:
        name = next((n for n in names if n in scripts), None)
        if name is None:
            continue
        body = scripts[name]
        if category == "types":
            has_types_script = True
        if name == "test" and _PLACEHOLDER_TEST.search(body):
            found.hint('package.json\'s "test" script is npm\'s placeholder ("no test specified"): not a test')
            continue
        command = script_command(manager, name)
        why = f'package.json has a "{name}" script ({_short(body)})'
        if _WATCH.search(body):
            found.skip(category, command, f"{why}, but it runs in watch mode and would never finish")
        elif not manager_at:
            found.skip(category, command, f"{why}; {manager_why}, but {manager} is not installed")
        else:
            found.plan(category, command, f"{why}; {manager_why}, found at {manager_at}")
    if (workspace / "tsconfig.json").is_file() and not has_types_script:
        found.tool("types", "tsc", "--noEmit", "tsconfig.json exists and package.json has no typecheck script")
    declares = any(isinstance(package.get(k), dict) and package[k]
                   for k in ("dependencies", "devDependencies"))
    if declares and scripts and not (workspace / "node_modules").is_dir():
        install = "npm ci" if manager == "npm" and (workspace / "package-lock.json").is_file() else f"{manager} install"
        found.hint(f"node_modules/ is missing: the package.json scripts will likely fail until `{install}` runs")


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

