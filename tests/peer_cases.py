"""Judging the peers' shell-safety cases (tests/fixtures/peers/*.json) with keel's policy.

Each case is a peer's own assertion, ported as data with its repository, path and commit: a
command and what the peer expects of it (read-only or not, allowed by its rules, the commands it
reads in the line, dangerous ...). ``outcome`` says what keel does with the same text, in the same
terms; ``expected`` is the peer's verdict in those terms, unless the case records keel's own
(``keel``) with a documented reason (``why``, a section of docs/policy.md).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from keel.policy.rules import RuleSet
from keel.policy.shell.risk import analyze_command, classify_command
from keel.policy.shell.walk import walk_script

FIXTURES = Path(__file__).parent / "fixtures" / "peers"
FILES = ("file", "file.txt", "input", "input.txt", "README.md", "output", "out.txt", "script.sed", "script.awk",
         "archive.gz", "target", "temp/a.txt", "src/a.py", "tests/test_a.py", "project/x.php", "file.php",
         "log.txt", "cli/mde.cjs", "test_requests.py")


def load() -> list[dict[str, Any]]:
    cases = []
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for i, case in enumerate(data["cases"]):
            cases.append({"file": path.name, "index": i, "repo": data["source"]["repo"],
                          "commit": case.get("commit", data["source"].get("commit")), **case})
    return cases


def workspace(root: Path) -> Path:
    """A git repository holding the files the peers' commands name (file.txt, input, target ...)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init", "--allow-empty"],
                   cwd=root, check=True)
    return root


def expected(case: dict[str, Any]) -> str:
    """The peer's verdict in keel's terms (or keel's own, recorded with a reason)."""
    if "keel" in case:
        return str(case["keel"])
    kind, peer = case["kind"], case["peer"]
    if kind in ("readonly", "git_config"):
        return "allow" if peer else "not allow"
    if kind == "classify":
        return "allow" if peer == "read-only" else "not allow"
    if kind == "allowed":
        return "allow" if peer else "not allow"
    if kind == "rules":
        return {"ALLOW": "allow", "ASK_USER": "not allow", "DENY": "deny"}[peer]
    if kind in ("unsafe", "dangerous", "selfkill"):
        return "not allow" if peer else "any"
    return "reads it"                                   # roots, split, wrapper, redirection


def outcome(case: dict[str, Any], ws: Path, other: Path) -> str:
    """What keel does with the case's command, in the terms ``expected`` uses."""
    kind, command = case["kind"], case["command"].replace("OTHER_REPO", str(other))
    if kind == "git_config":
        return _decision(classify_command(command, _configured(ws.parent / f"git{case['index']}", case["config"])))
    if kind == "dangerous":
        return "not allow" if all(classify_command(command, ws, confined=c).decision != "allow"
                                  for c in (False, True)) else "allow"
    if kind in ("allowed", "rules"):
        return _ruled(case, command, ws)
    if kind in ("roots", "split", "wrapper", "redirection"):
        return "reads it" if _reads(kind, command, case["peer"], ws) else "reads it otherwise"
    decision = classify_command(command, ws).decision
    if kind in ("unsafe", "selfkill") and not case["peer"]:
        return "any"
    return _decision(decision)


def _decision(verdict: Any) -> str:
    decision = verdict if isinstance(verdict, str) else verdict.decision
    return "allow" if decision == "allow" else "not allow"


def _ruled(case: dict[str, Any], command: str, ws: Path) -> str:
    """The peers' allow/deny lists as keel's permission rules, judged under a confining tier: these
    cases test which commands a line names, not whether a workspace write needs one."""
    def rule(prefix: str) -> str:
        return "shell(*)" if prefix == "*" else f"shell({prefix}:*)"

    rules = RuleSet.from_config(allow=[rule(p) for p in case.get("allow", [])],
                                deny=[rule(p) for p in case.get("deny", [])])
    decision = rules.evaluate_shell(command, ws, confined=True).verdict.decision
    return "deny" if decision == "deny" else "allow" if decision == "allow" else "not allow"


def agrees(want: str, got: str) -> bool:
    """A deny is a stronger "not allow"; "any" is a peer's negative that claims nothing of keel."""
    return want == "any" or got == want or (want == "not allow" and got == "deny")


def _reads(kind: str, command: str, peer: Any, ws: Path) -> bool:
    if kind == "redirection":
        try:
            commands, _ = walk_script(command, ws.parent / "home", frozenset({ws}))
        except Exception:  # noqa: BLE001 - a line keel cannot parse has no redirect it reads
            return peer is False
        return any(c.redirects for c in commands) == peer
    parts = analyze_command(command, ws, home=ws.parent / "home")
    if kind == "wrapper":
        return any(p.words == shlex.split(peer) for p in parts)
    names = [Path(p.words[0]).name for p in parts if p.words] + [Path(p.outer[0]).name for p in parts if p.outer]
    wanted = [Path(shlex.split(p)[0]).name if kind == "split" else Path(p).name for p in peer]
    return all(names.count(n) >= wanted.count(n) for n in set(wanted))


def _configured(repo: Path, config: list[list[str]]) -> Path:
    if not repo.exists():
        workspace(repo)
        for key, value in config:
            if value.startswith("INCLUDED:"):
                (repo / "included.config").write_text(value.removeprefix("INCLUDED:"))
                value = str(repo / "included.config")
            subprocess.run(["git", "config", key, value], cwd=repo, check=True)
        (repo / "file.txt").write_text("changed\n")
    return repo
