"""Makefile targets that verify: test/tests/check (test), lint (static), typecheck (types).

A project that wraps its checks in make targets has said how it wants them run, so these are
planned with source "makefile" and take precedence over inferred commands of the same category
(see keel.verify.detect). Target names are read from rule lines, not guessed from .PHONY alone.
A target whose recipe (or a prerequisite's) starts a known toolchain program that is not installed
(`go test ./...` without go) is skipped with a note instead of planned to fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from keel.verify.detect.common import Findings, read_text
from keel.verify.plan import Category

_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")   # the order make itself tries them
# `name other: deps` but not `VAR := value`, `VAR ::= value`, recipe lines (tab) or pattern rules.
# Possessive: the lazy name and the whitespace after it overlapped (spaces), quadratic in a long blank
# line (keel issue 22). Same matches and end; the name may keep trailing spaces, which split() drops.
_RULE = re.compile(r"^([A-Za-z0-9_.\-/ ]++)\s*+::?(?![=:])")
_RECIPE_PROGRAM = re.compile(r"^[@+\-\s]*([A-Za-z0-9_.\-]+)")
TARGET_CATEGORIES: dict[str, Category] = {
    "lint": "static", "typecheck": "types", "type-check": "types", "mypy": "types",
    "test": "test", "tests": "test", "check": "test",
}
# Programs whose absence certainly breaks a recipe. Shell builtins and coreutils are left out on
# purpose: `cd`, `set` or `[` are not on PATH and must never make a target look broken.
TOOLCHAIN_PROGRAMS = frozenset({
    "go", "cargo", "rustc", "npm", "npx", "pnpm", "yarn", "node", "deno", "bun", "python", "python3", "pytest",
    "ruff", "mypy", "flake8", "pylint", "pyright", "black", "isort", "tox", "nox", "uv", "poetry", "pipenv",
    "hatch", "golangci-lint", "richgo", "staticcheck", "gotestsum", "eslint", "tsc", "jest", "vitest", "mocha",
    "docker", "docker-compose", "podman", "bazel", "cmake", "ninja", "gradle", "mvn", "java", "javac", "dotnet",
    "ruby", "bundle", "rake", "php", "composer", "phpunit", "shellcheck",
})


@dataclass
class Rule:
    prerequisites: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)


def parse_rules(text: str) -> dict[str, Rule]:
    """Rules by target name, in order of first definition (recipe lines are the tab-indented ones)."""
    rules: dict[str, Rule] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            for name in current:
                rules[name].recipe.append(line[1:])
            continue
        match = _RULE.match(line)
        if match is None:
            continue      # assignments and directives (ifdef …) do not end a recipe
        current = match.group(1).split()
        rest = line[match.end():].split(";", 1)
        prerequisites = [p for p in rest[0].split() if p != "|"]
        for name in current:
            rules.setdefault(name, Rule()).prerequisites.extend(prerequisites)
            if len(rest) > 1 and rest[1].strip():       # `test: ; pytest` — an inline recipe
                rules[name].recipe.append(rest[1].strip())
    return rules


def makefile_targets(text: str) -> list[str]:
    """Target names defined by rules in ``text``, in order of first definition."""
    return list(parse_rules(text))


def recipe_programs(rules: dict[str, Rule], target: str) -> list[str]:
    """Known toolchain programs the target's recipe, or a prerequisite's, starts."""
    programs: list[str] = []
    pending, seen = [target], set[str]()
    while pending and len(seen) < 50:
        name = pending.pop(0)
        if name in seen or name not in rules:
            continue
        seen.add(name)
        for line in rules[name].recipe:
            match = _RECIPE_PROGRAM.match(line)
            if match and match.group(1) in TOOLCHAIN_PROGRAMS and match.group(1) not in programs:
                programs.append(match.group(1))
        pending += rules[name].prerequisites
    return programs


def detect_makefile(workspace: Path, found: Findings) -> None:
    name = next((n for n in _MAKEFILES if (workspace / n).is_file()), None)
    if name is None:
        return
    rules = parse_rules(read_text(workspace / name) or "")
    wanted = [t for t in rules if t in TARGET_CATEGORIES]
    if not wanted:
        return
    make_at = found.which("make")
    # `check` conventionally runs the tests (GNU); with a `test` target too, it would run them twice.
    if "check" in wanted and ("test" in wanted or "tests" in wanted):
        wanted.remove("check")
    for target in wanted:
        category = TARGET_CATEGORIES[target]
        why = f"{name} has a `{target}` target"
        missing = [p for p in recipe_programs(rules, target) if not found.which(p)]
        if not make_at:
            found.skip(category, f"make {target}", f"{why}, but make is not installed", "makefile")
        elif missing:
            found.skip(category, f"make {target}", f"{why}, but it runs {', '.join(missing)}, which "
                                                   f"{'is' if len(missing) == 1 else 'are'} not installed",
                       "makefile")
        else:
            found.plan(category, f"make {target}", f"{why}; make found at {make_at}", source="makefile")
