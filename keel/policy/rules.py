"""User permission rules from configuration: allow / ask / deny lists.

Syntax (see docs/policy.md):

- ``shell(git push)``      exactly this command (words after unwrapping, quotes removed)
- ``shell(npm test:*)``    this command followed by any further arguments
- ``shell(*)``             any command
- ``read(.env)``, ``read(secrets/**)``   gitignore-style globs, relative to the workspace
- ``edit(src/**)``; ``write(...)`` is the same as ``edit(...)``

Order: deny rules, then ask rules, then allow rules. A built-in "deny" from the shell policy is
final: no rule turns it into "allow". Allow rules only lift the asks a command raises itself,
judged per sub-command after unwrapping, so ``shell(npm test:*)`` never allows
``npm test; rm -rf x``; asks raised by wrappers (sudo), risky environment variables,
redirections or unparseable structure stay.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import pathspec

from keel.policy.shell.commands import Finding
from keel.policy.shell.risk import PartReport, Verdict, analyze_command, verdict_of

Kind = Literal["shell", "read", "edit"]
_RULE = re.compile(r"^\s*(shell|read|edit|write)\((.*)\)\s*$", re.DOTALL)


class RuleError(ValueError):
    """A rule string that cannot be understood; the message names the rule."""


@dataclass(frozen=True)
class Rule:
    kind: Kind
    text: str                                   # as written in the configuration
    words: tuple[str, ...] = ()                 # shell rules
    prefix: bool = False                        # shell rules ending in ':*'
    spec: pathspec.GitIgnoreSpec | None = None  # read/edit rules

    @classmethod
    def parse(cls, text: str) -> Rule:
        if not isinstance(text, str):
            raise RuleError(f"rule {text!r} must be a string like 'shell(npm test:*)'")
        m = _RULE.match(text)
        if m is None:
            raise RuleError(f"rule {text!r}: expected shell(...), read(...), edit(...) or write(...)")
        kind_text, inner = m.group(1), m.group(2).strip()
        if not inner:
            raise RuleError(f"rule {text!r}: the parentheses are empty")
        if kind_text == "shell":
            return cls._shell(text, inner)
        kind: Kind = "read" if kind_text == "read" else "edit"
        if "\x00" in inner or "\n" in inner:
            raise RuleError(f"rule {text!r}: a path pattern must be one line")
        if inner.startswith("!"):
            raise RuleError(f"rule {text!r}: '!' negation is not supported; put the exception in another list")
        try:
            spec = pathspec.GitIgnoreSpec.from_lines([inner])
        except Exception as exc:
            raise RuleError(f"rule {text!r}: bad path pattern ({exc})") from exc
        return cls(kind, text, spec=spec)

    @classmethod
    def _shell(cls, text: str, inner: str) -> Rule:
        if inner == "*":
            return cls("shell", text, (), True)
        prefix = inner.endswith(":*")
        body = inner[:-2].strip() if prefix else inner
        try:
            words = tuple(shlex.split(body))
        except ValueError as exc:
            raise RuleError(f"rule {text!r}: {exc}") from exc
        if not words:
            raise RuleError(f"rule {text!r}: no command before ':*'")
        if any("*" in w for w in words):
            raise RuleError(f"rule {text!r}: '*' is only allowed as a trailing ':*' (any further arguments)")
        return cls("shell", text, words, prefix)

    def matches_words(self, words: list[str]) -> bool:
        n = len(self.words)
        if self.prefix:
            return list(self.words) == words[:n]
        return list(self.words) == words

    def matches_path(self, relative: str) -> bool:
        return self.spec is not None and self.spec.match_file(relative)


@dataclass
class ShellEvaluation:
    verdict: Verdict
    parts: list[PartReport]

    @property
    def network(self) -> bool:
        return any(p.network for p in self.parts)

    @property
    def asking_parts(self) -> list[PartReport]:
        return [p for p in self.parts if p.worst.decision == "ask"]


@dataclass
class RuleSet:
    allow: list[Rule] = field(default_factory=list)
    ask: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)

    @classmethod
    def from_config(cls, allow: list[str] | None = None, ask: list[str] | None = None,
                    deny: list[str] | None = None) -> RuleSet:
        """Parse rule strings; raise RuleError naming the first rule that is not understood.
        Rules naming MCP tools (``mcp__SERVER__TOOL``) are the MCP client's (keel.ext.mcp)."""
        def parse(texts: list[str] | None) -> list[Rule]:
            return [Rule.parse(t) for t in texts or [] if not (isinstance(t, str) and t.strip().startswith("mcp__"))]
        return cls(parse(allow), parse(ask), parse(deny))

    # -- shell ---------------------------------------------------------------------------------

    def evaluate_shell(self, command: str, workspace: Path, *, confined: bool = False,
                       pid_namespace: bool = False, snapshot: bool = False) -> ShellEvaluation:
        """``confined``/``pid_namespace``: what the active OS tier gives (docs/policy.md, "Tiers").
        ``snapshot``: keel holds the workspace's bytes from before the command (keel.trace.snapshot),
        so a deletion inside it can be undone (git ref and stash destruction still asks)."""
        parts = [self._apply(part, workspace) for part in
                 analyze_command(command, workspace, confined=confined, pid_namespace=pid_namespace,
                                 snapshot=snapshot)]
        return ShellEvaluation(verdict_of(parts), parts)

    def _apply(self, part: PartReport, workspace: Path) -> PartReport:
        findings = list(part.findings)
        root = Path(os.path.realpath(workspace))
        names = [part.words, part.outer]
        if part.words and "/" in part.words[0]:
            names.append([os.path.basename(part.words[0]), *part.words[1:]])
        for rule in self.deny:
            if rule.kind == "shell" and any(rule.matches_words(w) for w in names if w):
                findings.append(Finding("deny", f"denied by rule {rule.text}", lift=None))
        for rule in self.ask:
            if rule.kind == "shell" and any(rule.matches_words(w) for w in names if w):
                findings.append(Finding("ask", f"rule {rule.text} asks", lift=None))
        for path in part.paths:
            kind, rule_text = self.path_decision("read", path, root)
            if kind in ("deny", "ask"):
                findings.append(Finding(kind, f"touches {_relative(path, root)}, which rule {rule_text} covers",
                                        lift=None))
            kind, rule_text = self.path_decision("edit", path, root)
            if kind == "deny":
                findings.append(Finding("deny", f"touches {_relative(path, root)}, which rule {rule_text} covers",
                                        lift=None))
        allowing = next((r for r in self.allow if r.kind == "shell" and part.words and r.matches_words(part.words)),
                        None)
        kept = []
        for finding in findings:
            if finding.decision == "ask" and finding.lift == "shell" and allowing is not None:
                continue
            if finding.decision == "ask" and finding.lift == "read" and finding.path is not None \
                    and self.path_decision("read", finding.path, root)[0] == "allow":
                continue
            kept.append(finding)
        if len(kept) < len(findings):
            # what was lifted still needs the network if it did before
            why = f"allowed by rule {allowing.text}" if allowing is not None else "allowed by a read(...) rule"
            kept.append(Finding("allow", why, network=part.network))
        return replace(part, findings=kept)

    # -- paths ---------------------------------------------------------------------------------

    def path_decision(self, kind: Kind, path: Path, workspace: Path) -> tuple[str | None, str]:
        """('deny'|'ask'|'allow', rule text) for a real path, or (None, '') when no rule matches."""
        root = Path(os.path.realpath(workspace))
        relative = _relative(path, root)
        if relative is None:
            return None, ""
        for decision, rules in (("deny", self.deny), ("ask", self.ask), ("allow", self.allow)):
            for rule in rules:
                if rule.kind == kind and rule.matches_path(relative):
                    return decision, rule.text
        return None, ""

    def add_allow(self, rule: Rule) -> None:
        if rule not in self.allow:
            self.allow.append(rule)


def _relative(path: Path, root: Path) -> str | None:
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts else "."
