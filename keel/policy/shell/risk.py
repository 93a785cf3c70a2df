"""The shell risk classifier: ``classify_command(command, workspace) -> Verdict``.

A command is parsed (tree-sitter-bash), flattened into every simple command that would run —
including those inside ``$(...)``, ``<(...)``, ``bash -c``, ``eval``, wrappers and pipelines —
and each one is judged. The verdict is the most severe over all of them (deny > ask > allow).
Anything that cannot be parsed or understood is "ask"; nothing is allowed by default.

Design choice: running the project's own code (``python x.py``, ``pytest``, ``npm test``) is
allowed, because the OS sandbox is the boundary for executed code and running code is how an
agent verifies its work. This policy guards the *commands themselves*: what they delete,
overwrite, read from outside, send over the network or hand to a shell.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from keel.policy.hide import hidden_by_tier
from keel.policy.shell import builds as shell_builds
from keel.policy.shell import commands as shell_commands
from keel.policy.shell import git as shell_git
from keel.policy.shell import system as shell_system
from keel.policy.shell import text as shell_text
from keel.policy.shell import tools as shell_tools
from keel.policy.shell.args import (
    option_writes,
    pythonpath_outside,
    recursive_secrets,
    secret_reads,
    spell_out,
    subscript_code,
    unknown_paths,
)
from keel.policy.shell.bashcd import TIME_BUDGET, Budget, TooComplex
from keel.policy.shell.commands import Finding, Invocation, allow, ask, deny, judge_write, runs_code
from keel.policy.shell.decision import PartReport, Verdict, apply_tier, verdict_of, worst_decision
from keel.policy.shell.inline import inline_secrets
from keel.policy.shell.line import (
    DECODERS,
    FETCHERS,
    clone_target,
    detached,
    escapes_hide_text,
    exfiltration,
    extracted_into,
    fetched_targets,
    mark_waited,
    output_sent,
    pipes_into_runner,
    runs_fetched,
    secret_params,
)
from keel.policy.shell.options import known_options
from keel.policy.shell.parse import Cwds, Redirect, ShellParseError, SimpleCommand, Word
from keel.policy.shell.paths import PathJudge, expand_brace_words, within
from keel.policy.shell.unwrap import SHELLS, classify_env, unwrap
from keel.policy.shell.walk import walk_script

MAX_DEPTH = 6

JUDGES = {**shell_commands.JUDGES, **shell_builds.JUDGES, **shell_system.JUDGES, **shell_text.JUDGES, **shell_tools.JUDGES, **shell_git.JUDGES}
XARGS_SAFE = frozenset({"grep", "egrep", "fgrep", "cat", "head", "tail", "wc", "ls", "file", "stat", "du",
                        "basename", "dirname", "echo", "printf", "realpath", "readlink", "md5sum", "sha1sum",
                        "sha256sum"})
# Commands that act on names, never reading a file's contents: a glob that can match a secret is no read.
NAMES_ONLY = frozenset({"ls", "stat", "du", "chmod", "chown", "chgrp", "rm", "rmdir", "touch", "mkdir", "find", "fd",
                        "realpath", "readlink", "basename", "dirname", "test", "[", "[["})
METADATA_ONLY = frozenset({"ls", "cd", "pushd", "du", "df", "stat", "tree", "find", "fd", "echo", "printf",
                           "realpath", "readlink", "dirname", "basename", "test", "[", "[[", "file", "pwd", "which"})
SYSTEM_BIN = tuple(Path(p) for p in ("/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin",
                                     "/usr/local/sbin"))
# `--exclude=.env`: a name pattern, not a file that is read.
_NAME_FILTERS = ("--exclude=", "--exclude-dir=", "--include=", "--glob=", "--iglob=", "--ignore=")
PRIVILEGE = frozenset({"sudo", "doas", "su", "pkexec"})


class Analysis:
    """Collects PartReports for a command line; also the JudgeEnv the per-command judges use."""

    def __init__(self, workspace: Path, home: Path, pid_namespace: bool = False, snapshot: bool = False,
                 seconds: float = TIME_BUDGET) -> None:
        self.paths = PathJudge(workspace, home)
        self.snapshot = snapshot              # a snapshot taken before the command can restore workspace files
        self.budget = Budget(time.thread_time() + seconds)
        self.home = home
        self.pid_namespace = pid_namespace    # a PID namespace reaps what a command leaves behind
        # bubblewrap, the tier with a PID namespace, also hides the workspace's secret files from commands
        self.tier_hidden: Callable[[], list[Path]] | None = (
            functools.partial(hidden_by_tier, self.paths.root) if pid_namespace else None)
        self.fetched: set[Path] = set()       # files filled with downloaded or decoded data on this line
        self.fetched_trees: set[Path] = set()  # directories a downloaded archive was unpacked into
        self.parts: list[PartReport] = []
        self.depth = 0

    # -- entry points ------------------------------------------------------------------------

    def run(self, source: str, cwds: Cwds) -> None:
        try:
            commands, issues = walk_script(source, self.home, cwds, self.budget)
        except ShellParseError as exc:
            self._structure("ask", f"cannot be checked: {exc}", source)
            return
        for issue in issues:
            self._structure(issue.decision, issue.reason, issue.text)
        mark_waited(commands)
        for command in commands:
            self.budget.check()
            self.command(command)

    def sub_code(self, code: Word, cwds: Cwds, label: str) -> str:
        start = len(self.parts)
        if not code.literal:
            if any(self._feeds_code(sub.commands) for sub in code.subs):
                self._structure("deny", f"{label} runs downloaded or decoded code", code.value)
            else:
                self._structure("ask", f"{label} runs code built at run time", code.value)
        elif self.depth >= MAX_DEPTH:
            self._structure("ask", f"{label}: shell code nested too deeply", code.value)
        else:
            self.depth += 1
            try:
                self.run(code.value, cwds)
            finally:
                self.depth -= 1
        return worst_decision(self.parts[start:])

    def sub_command(self, argv: list[Word], cwds: Cwds, extra_args: bool, label: str) -> str:
        start = len(self.parts)
        if self.depth >= MAX_DEPTH:
            self._structure("ask", f"{label}: nested too deeply", label)
        else:
            self.depth += 1
            try:
                text = f"{label} {' '.join(w.value for w in argv)}"
                self.command(SimpleCommand(text, [], argv, [], cwds), extra_args=extra_args)
            finally:
                self.depth -= 1
        return worst_decision(self.parts[start:])

    def assignment(self, word: Word, cwds: Cwds, exported: bool = True) -> list[Finding]:
        """``NAME=value``; ``exported``: programs see it (a prefix, ``env``, ``export``), so only
        names on the list of known-harmless ones pass."""
        name, _, value = word.value.partition("=")
        name = name.rstrip("+")
        kind = classify_env(name)
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            return [ask(f"assigns {name!r}, a name only known when it runs", lift=None)]
        if kind == "deny":
            return [deny(f"sets {name}, which makes the shell, loader or git run code", lift=None)]
        if kind == "code":
            return [ask(f"sets {name}, which changes which programs run", lift=None)]
        if kind == "command" and value:
            self.sub_code(Word(value, value, word.params, word.subs), cwds, f"{name}=")
        if kind == "safe" and name == "PYTHONPATH" and (outside := pythonpath_outside(self.paths, word, cwds)):
            return [ask(f"PYTHONPATH takes modules from {outside!r}, outside the workspace", lift=None)]
        # a name already in the environment stays exported when a plain assignment changes it
        exported = exported or name in os.environ
        if kind == "plain" and exported:
            # FOO=bar cmd: what it changes stays inside what the program may do, which a confining tier confines
            return [Finding("allow", f"sets the environment variable {name} for the program it runs", lift=None,
                            tier="code")]
        return []

    # -- one simple command --------------------------------------------------------------------

    def command(self, cmd: SimpleCommand, extra_args: bool = False) -> None:
        start = len(self.parts)
        findings: list[Finding] = []
        if any(w.brace for w in cmd.words):
            # bash expands braces into separate words before anything else: {-o,/tmp/x} is two
            words = expand_brace_words(cmd.words)
            if words is None:
                findings.append(ask("brace expansion makes too many words to check", lift=None))
            else:
                cmd = dataclasses.replace(cmd, words=words)
        paths: list[Path] = []
        for word in cmd.assignments:
            findings += self.assignment(word, cmd.cwds, exported=bool(cmd.words))
        findings += subscript_code(cmd.words + cmd.assignments)
        for redirect in cmd.redirects:
            findings += self._redirect(redirect, cmd, paths)
        if not cmd.words:
            self.parts.append(PartReport(cmd.text, [], [], findings + [allow("sets variables or redirects")], paths))
            return
        un = unwrap(cmd.words)
        findings += [Finding(d, r, lift=None) for d, r in un.issues]
        findings += secret_params(cmd.words + cmd.assignments)
        upstream_fetches = self._feeds_code(cmd.upstream)
        for target in fetched_targets(un, cmd, upstream_fetches):
            for place in self.paths.places(target, cmd.cwds):
                self.fetched.update(place.candidates())
        cwds = self._chdir(un.chdir, cmd.cwds) if un.chdir is not None else cmd.cwds
        for word in un.env:
            findings += self.assignment(word, cwds)
        for word in un.writes:
            findings += judge_write(self, word, cwds)
        for shell, code in un.shell_code:
            findings.append(allow(f"{shell} -c runs the code judged separately"))
            if shell not in ("bash", "sh", "su"):
                findings.append(ask(f"{shell} -c: {shell} syntax may differ from what was checked", lift=None))
            self.sub_code(code, cwds, f"{shell} -c")
        privilege = next((layer for layer in un.layers if layer in PRIVILEGE), None)
        if privilege:
            findings.append(ask(f"runs as another user ({privilege})", lift=None))
        if un.argv:
            argv, spelled = spell_out(un.argv)
            findings += spelled
            inv = Invocation(argv, cwds, extra_args or un.extra_args)
            own = self._judge(inv, cmd)
            own += known_options(self, Invocation(un.argv, cwds, inv.extra_args))   # as written, unabbreviated
            own += option_writes(self, inv) + unknown_paths(self, inv) + recursive_secrets(self, inv)
            own += secret_reads(inv, inv.args, cwds, contents=inv.name not in NAMES_ONLY)
            if (sent := output_sent(inv)) is not None:
                own.append(sent)
            if runs_fetched(inv, self.paths, self.fetched, self.fetched_trees):
                own.append(deny(f"{inv.name} runs a file downloaded or decoded earlier on this line", lift=None))
            for target in extracted_into(inv, self.paths, self.fetched) + [t for t in [clone_target(inv)] if t]:
                self.fetched_trees.update(p.real for p in self.paths.places(target, cwds) if p.real is not None)
            if upstream_fetches and pipes_into_runner(inv, un) and any(f.decision != "allow" for f in own):
                own.append(deny(f"pipes downloaded or decoded data into {inv.name}, which can run it", lift=None))
            if "xargs" in un.layers and inv.name not in XARGS_SAFE and all(f.decision == "allow" for f in own):
                own.append(ask(f"xargs gives {inv.name} arguments read from its input"))
            findings += own
        elif upstream_fetches and ("xargs" in un.layers or un.shell_code):
            findings.append(deny("pipes downloaded or decoded data into a command that runs it", lift=None))
        elif not un.shell_code:
            findings.append(allow(f"{' '.join(un.layers) or cmd.words[0].value} runs no command"))
            if un.layers and un.layers[-1] == "env":
                findings.append(Finding("allow", "env prints the environment", secret=True))
        why = detached(un, Invocation(un.argv, cwds) if un.argv else None, cmd)
        if why:
            findings.append(ask(why, lift=None) if self.pid_namespace else
                            deny(f"{why}, and no PID namespace will stop it", lift=None))
        findings += self._argument_reads(cmd.words, cwds, un.argv, paths)
        part = PartReport(cmd.text, [w.value for w in un.argv], [w.value for w in cmd.words], findings, paths)
        self.parts.insert(start, part)
        if privilege and any(f.destructive for p in self.parts[start:] for f in p.findings):
            part.findings.append(deny(f"{privilege} with a destructive command", lift=None))

    def _chdir(self, target: Word, cwds: Cwds) -> Cwds:
        """Where ``env -C DIR`` / ``sudo -D DIR`` run their command."""
        return frozenset(place.real for place in self.paths.places(target, cwds))

    def _judge(self, inv: Invocation, cmd: SimpleCommand) -> list[Finding]:
        argv0 = inv.argv[0]
        if not argv0.literal or argv0.glob or argv0.brace:
            if self._feeds_code(cmd.upstream):
                return [deny("pipes downloaded or decoded data into a command only known when it runs")]
            return [ask("the command name is only known when it runs", lift=None)]
        out: list[Finding] = []
        name = inv.name
        by_path = "/" in argv0.value and not self._trusted_program(argv0, inv.cwds)
        project = by_path and self.paths.project_program(argv0, inv.cwds)
        if by_path and not project:
            out.append(ask(f"runs {argv0.value!r}, a program given by path"))
        judge = JUDGES.get(name) or shell_system.judge_mkfs_family(name) or shell_tools.python_judge(name)
        if judge is None and cmd.calls_function:
            out.append(allow(f"calls the function {name!r}, whose body is judged separately"))
        elif judge is None:
            # ./scripts/x.sh, ./gradlew: the project's own program, code a confining tier runs unasked
            out.append(runs_code(f"runs {argv0.value!r}, a program of the project") if project
                       else ask(f"unknown command {name!r}"))
            for word in inv.args:
                for place in self.paths.places(word, inv.cwds):
                    reason = self.paths.protected_reason(place)
                    if reason and not self.paths.harmless_sink(place):
                        out.append(deny(f"{name} may write a protected file: {reason}", lift=None))
        else:
            out += judge(inv, self)
        out += self._code_sources(inv, cmd)
        if shell_tools.PYTHON.fullmatch(name) or name in shell_tools.INTERPRETERS or name in ("nodejs",):
            # python3 -c "open('.env')" asks as cat .env does; rmtree('node_modules') as rm -rf does
            out += inline_secrets(self.paths, inv, cmd, self.snapshot)
        return out

    def _trusted_program(self, argv0: Word, cwds: Cwds) -> bool:
        """A system binary, or a tool inside a Python virtualenv of the workspace."""
        for place in self.paths.places(argv0, cwds):
            if place.real is None:
                return False
            if any(place.real.parent == d or place.real.parent == Path(os.path.realpath(d)) for d in SYSTEM_BIN):
                continue
            venv = place.lexical.parent.parent if place.lexical else None
            if venv is not None and place.where == "inside" and (venv / "pyvenv.cfg").is_file():
                continue
            return False
        return True

    def _code_sources(self, inv: Invocation, cmd: SimpleCommand) -> list[Finding]:
        """Interpreters: where does their program come from? Downloads into a shell are refused."""
        name = inv.name
        is_python = shell_tools.PYTHON.fullmatch(name) is not None
        if not (name in SHELLS or is_python or name in shell_tools.INTERPRETERS or name in ("source", ".", "eval")):
            return []
        targets = [r.target for r in cmd.redirects if r.target is not None and r.op in ("<", "<<<")]
        for word in inv.args + targets:
            if any(self._feeds_code(sub.commands) for sub in word.subs):
                return [deny(f"{name} runs downloaded or decoded code")]
            if name in SHELLS and any(sub.kind == "process" for sub in word.subs):
                return [ask(f"{name} runs a script produced by another command")]
        if not shell_tools.reads_code_from_stdin(inv):
            return []
        if self._feeds_code(cmd.upstream):
            return [deny(f"pipes downloaded or decoded data into {name}")]
        for redirect in reversed(cmd.redirects):     # a redirect of stdin wins over a pipe (bash applies it last)
            if redirect.op in ("<<", "<<-", "<<<") and redirect.target is not None:
                if name in SHELLS:
                    self.sub_code(_heredoc_code(redirect), cmd.cwds, f"{name} here-document")
                    return []
                if is_python or name == "node":
                    return [runs_code(f"{name} runs code from a here-document")]
                return [ask(f"{name} runs code from a here-document")]
            if redirect.op == "<" and redirect.target is not None:
                return [runs_code(f"{name} runs a script file")] if is_python or name == "node" else \
                    [ask(f"{name} runs a script file")]
        if cmd.upstream:
            source = cmd.upstream[-1]
            if name in SHELLS and len(cmd.upstream) == 1 and source.words and source.words[0].value in ("echo", "printf"):
                words = source.words[1:]
                text = " ".join(w.value for w in words)
                self.sub_code(Word(text, text, tuple(p for w in words for p in w.params),
                                   tuple(s for w in words for s in w.subs)), cmd.cwds, f"{name} (piped)")
            return [ask(f"{name} runs code from a pipe")]
        return [ask(f"{name} waits for a program on stdin")]

    def _feeds_code(self, commands: list[SimpleCommand]) -> bool:
        """Does any of these commands fetch from the network or decode hidden data?"""
        for cmd in commands:
            if not cmd.words:
                continue
            un = unwrap(cmd.words)
            names = {w.value.rsplit("/", 1)[-1] for w in un.argv[:1]} | set(un.layers)
            if names & (FETCHERS | DECODERS) or escapes_hide_text(un.argv):
                return True
            for _, code in un.shell_code:
                if set(re.findall(r"[\w.-]+", code.value)) & (FETCHERS | DECODERS):
                    return True
            if any(self._feeds_code(sub.commands) for w in cmd.words for sub in w.subs):
                return True
        return False

    # -- shared checks -------------------------------------------------------------------------

    def _redirect(self, redirect: Redirect, cmd: SimpleCommand, paths: list[Path]) -> list[Finding]:
        target = redirect.target
        if target is None or redirect.op in ("<<", "<<-", "<<<"):
            return []
        if target.subs and all(sub.kind == "process" for sub in target.subs):
            return []                                   # > >(cmd): a pipe; cmd was judged
        out: list[Finding] = []
        if redirect.writes:
            paths.extend(p.real for p in self.paths.places(target, cmd.cwds)
                         if p.real is not None and p.where in ("inside", "root"))
            for finding in judge_write(self, target, cmd.cwds, verb="redirects output to",
                                       replaces=redirect.op not in (">>", "&>>")):
                out.append(Finding(finding.decision, finding.reason, None, None, True, tier=finding.tier))
        if redirect.op in ("<", "<>", "<&"):
            out += self._argument_reads([Word("<", "<"), target], cmd.cwds, [], paths)
            out += secret_reads(Invocation([Word("<", "<")], cmd.cwds), [target], cmd.cwds)
        return out

    def _argument_reads(self, words: list[Word], cwds: Cwds, argv: list[Word], paths: list[Path]) -> list[Finding]:
        """Credentials named anywhere in the arguments (also in ``--opt=PATH`` and ``@PATH``)."""
        out: list[Finding] = []
        name = argv[0].value.rsplit("/", 1)[-1] if argv else ""
        for word in words[1:]:
            if word.literal and word.value.startswith(_NAME_FILTERS):
                continue                          # a name pattern to skip, not a file
            candidates = [word] if not (word.literal and re.match(r"--[\w-]+=", word.value)) else []
            if word.literal:
                for sep in ("=", "@"):
                    if sep in word.value:
                        rest = word.value.split(sep, 1)[1]
                        candidates.append(Word(rest, rest))
            for candidate in candidates:
                for place in self.paths.places(candidate, cwds):
                    if place.real is not None and place.where in ("inside", "root"):
                        paths.append(place.real)
                    secret = self.paths.secret_reason(place)
                    if secret:
                        out.append(deny(secret, lift=None, secret=True))
                    elif place.lexical and str(place.lexical).startswith(("/dev/tcp/", "/dev/udp/")):
                        out.append(deny("opens a network connection through /dev/tcp", lift=None))
                    elif (path := self.paths.secret_file(place)) is not None and place.where != "unknown":
                        out.append(ask(f"reads the secret file {path.name}", lift="read", path=path, secret=True))
                    elif name and name not in METADATA_ONLY and place.real is not None \
                            and within(self.home, place.real) and place.where == "outside":
                        out.append(ask(f"reads everything under {place.real}, including credentials", lift=None))
        return out

    def _structure(self, decision: str, reason: str, text: str) -> None:
        self.parts.append(PartReport(text, [], [], [Finding(decision, reason, lift=None)]))


def _heredoc_code(redirect: Redirect) -> Word:
    if redirect.op == "<<<":
        assert redirect.target is not None
        return redirect.target
    body = redirect.heredoc or ""
    delimiter = redirect.target.value if redirect.target is not None else ""
    lines = body.split("\n")
    if lines and lines[-1].strip() == delimiter:
        lines = lines[:-1]
    text = "\n".join(lines)
    params = ("$?",) if redirect.heredoc_expands and "$" in text else ()
    return Word(text, text, params)


def analyze_command(command: str, workspace: Path | None = None, home: Path | None = None, *,
                    confined: bool = False, pid_namespace: bool = False, snapshot: bool = False,
                    budget_seconds: float = TIME_BUDGET) -> list[PartReport]:
    """Every command ``command`` would run, with findings. Never raises on bad input.

    ``confined``: an OS tier (bubblewrap, Landlock) confines the filesystem for the command.
    ``snapshot``: the workspace is snapshotted before the command runs (deleting its own files
    can be undone; refs and stashes are not in a snapshot). ``budget_seconds``: the judge's own
    time limit, past which the verdict is "ask" (TOO_COMPLEX).
    """
    root = Path(os.path.realpath(workspace if workspace is not None else os.getcwd()))
    home = home if home is not None else Path(os.path.expanduser("~"))
    analysis = Analysis(root, home, pid_namespace, snapshot, budget_seconds)
    try:
        analysis.run(command, frozenset({root}))
    except TooComplex as exc:            # the policy's own budget: never minutes or gigabytes per command
        analysis.parts = [PartReport(command[:200], [], [], [ask(str(exc), lift=None)])]
    except Exception as exc:  # never fail open: an internal error is a question, not a pass
        analysis.parts.append(PartReport(command, [], [], [ask(f"internal error while checking ({exc!r})",
                                                               lift=None)]))
    if not analysis.parts:
        analysis.parts.append(PartReport(command, [], [], [ask("no command found", lift=None)]))
    exfiltration(analysis.parts, confined)
    for part in analysis.parts:
        part.findings = [apply_tier(f, confined) for f in part.findings]
    return analysis.parts


def classify_command(command: str, workspace: Path | None = None, *, confined: bool = False,
                     pid_namespace: bool = False, snapshot: bool = False) -> Verdict:
    """Judge a shell command. ``workspace`` defaults to the current directory; ``confined`` says
    whether an OS tier confines the filesystem (False, the safe default, when unknown)."""
    return verdict_of(analyze_command(command, workspace, confined=confined, pid_namespace=pid_namespace,
                                      snapshot=snapshot))

