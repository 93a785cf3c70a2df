"""Go and Rust test runners, and make (whose own line only says which target failed)."""

from __future__ import annotations

import re

from keel.outputs.failure_parsers.common import (
    Finding,
    drop_parents,
    is_project_path,
    stable,
    tests_headline,
    unique,
)

# -- go test ---------------------------------------------------------------------------------------
_GO_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE)\s+(\S+)")
_GO_FAIL = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_MESSAGE = re.compile(r"^\s+(\S+\.go):(\d+): (.*)$")
_GO_PACKAGE = re.compile(r"^FAIL\s+(\S+)\s+(?:\[(build failed|setup failed)\]|[\d.]+s)")
_GO_PANIC = re.compile(r"^panic: (.+)$")
_GO_FRAME = re.compile(r"^\t(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$")


def parse_go_test(lines: list[str]) -> Finding | None:
    failed: list[str] = []
    messages: dict[str, list[tuple[str, str]]] = {}
    broken_packages: list[str] = []
    current = ""
    for line in lines:
        if m := _GO_RUN.match(line):
            current = m[1]
        elif m := _GO_FAIL.match(line):
            current = m[1]
            failed.append(m[1])
        elif (m := _GO_MESSAGE.match(line)) and current:
            messages.setdefault(current, []).append((f"{m[1]}:{m[2]}", m[3].strip()))
        elif (m := _GO_PACKAGE.match(line)) and m[2]:
            broken_packages.append(f"{m[1]} [{m[2]}]")
    panic = next((m[1] for line in lines if (m := _GO_PANIC.match(line))), None)
    if not failed and not broken_packages and panic is None:
        return None
    finding = Finding(headline="", is_test_run=bool(failed))
    failed, broken_packages = unique(failed), unique(broken_packages)
    tests = drop_parents(failed, ("/",))       # a parent fails because its subtest did: name the subtest
    for test in tests:
        said = messages.get(test, [])
        finding.ids.append(test)
        finding.body.append(f"--- FAIL: {test}" + (f" - {said[0][1]}" if said else ""))
        for location, text in said[:3]:
            finding.locations.append(location)
            finding.body.append(f"  {location}: {text}")
    if panic is not None:
        frame = next((f"{m[1]}:{m[2]}" for line in lines if (m := _GO_FRAME.match(line)) and is_project_path(m[1])
                      and not m[1].endswith("/testing.go")), None)
        finding.body.append(f"panic: {panic}" + (f" at {frame}" if frame else ""))
        finding.locations.append(frame or "")
        if not finding.ids:
            finding.ids.append(stable(f"panic: {panic}"))
    for package in broken_packages:
        finding.ids.append(package)
        finding.body.append(f"FAIL {package}")
    if failed:
        finding.headline = tests_headline(tests)
    elif broken_packages:
        finding.headline = "go: " + ", ".join(broken_packages)
    else:
        finding.headline = f"panic: {panic}"
    return finding


# -- cargo test ------------------------------------------------------------------------------------
_CARGO_FAILED = re.compile(r"^test (.+) \.\.\. FAILED$")
_CARGO_PANIC_NEW = re.compile(r"^thread '([^']+)'(?: \(\d+\))? panicked at (\S+?):(\d+):\d+:$")
_CARGO_PANIC_OLD = re.compile(r"^thread '([^']+)'(?: \(\d+\))? panicked at '(.*)', (\S+?):(\d+):\d+$")


def parse_cargo_test(lines: list[str]) -> Finding | None:
    failed = [m[1] for line in lines if (m := _CARGO_FAILED.match(line))]
    if not failed:
        return None
    panics: dict[str, tuple[str, str]] = {}
    for i, line in enumerate(lines):
        if m := _CARGO_PANIC_NEW.match(line):
            text = []
            for follow in lines[i + 1: i + 6]:
                if not follow.strip() or follow.startswith(("note:", "stack backtrace:")):
                    break
                text.append(follow.strip())
            panics[m[1]] = ("; ".join(text), f"{m[2]}:{m[3]}")
        elif m := _CARGO_PANIC_OLD.match(line):
            panics[m[1]] = (m[2], f"{m[3]}:{m[4]}")
    finding = Finding(headline="", is_test_run=True)
    for test in dict.fromkeys(failed):
        message, location = panics.get(test, ("", ""))
        finding.ids.append(test)
        finding.body.append(f"FAILED {test}" + (f" - {message}" if message else ""))
        if location:
            finding.locations.append(location)
            finding.body.append(f"  panicked at {location}")
    finding.headline = tests_headline(finding.ids)
    return finding


# -- make ------------------------------------------------------------------------------------------
_MAKE_ERROR = re.compile(r"^g?make(?:\[\d+\])?: \*\*\* \[(?:[^\]]*?:\d+: )?(.+?)\] Error (\d+)")
_MAKE_NO_RULE = re.compile(r"^g?make(?:\[\d+\])?: \*\*\* (No rule to make target .*?)\.?\s+Stop\.$")
_MAKE_CHATTER = re.compile(r"^g?make(?:\[\d+\])?: (?:Entering|Leaving) directory")


def parse_make(lines: list[str]) -> Finding | None:
    """Used only when nothing recognised the recipe's own output: then the lines just before make's
    error are the recipe's last words."""
    for i, line in enumerate(lines):
        if m := _MAKE_NO_RULE.match(line):
            return Finding(headline=f"make: {m[1]}", ids=[stable(f"make: {m[1]}")], body=[line.strip()])
        if m := _MAKE_ERROR.match(line):
            before = [t for t in lines[max(0, i - 30): i] if t.strip() and not _MAKE_CHATTER.match(t)
                      and not _MAKE_ERROR.match(t)][-8:]
            last = before[-1].strip() if before else ""
            return Finding(headline=f"make target '{m[1]}' failed (Error {m[2]})" + (f": {last}" if last else ""),
                           ids=[stable(f"make {m[1]}: {last}")], body=[*(t.rstrip() for t in before), line.strip()])
    return None
