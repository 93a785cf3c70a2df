"""Per-command judgments: read-only utilities, file writers, deleters, system and network tools.

Each judge looks at one command (already unwrapped) and returns Findings. A judge only needs
to say what is special about its command; the caller adds what applies to every command
(credential paths among the arguments, redirections, environment assignments).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from keel.policy.shell.facts import has, options, values_of
from keel.policy.shell.parse import Cwds, Word
from keel.policy.shell.paths import PathJudge, Place


@dataclass(frozen=True)
class Finding:
    decision: str                  # "allow" | "ask" | "deny"
    reason: str
    lift: str | None = "shell"     # which user allow rule may lift an ask: "shell", "read", None
    path: Path | None = None       # for lift == "read": the file a read(...) rule must cover
    destructive: bool = False      # deletes or overwrites: never under sudo
    network: bool = False
    # What the OS tier changes: "write" — an ask whose every effect stays in the workspace, which
    # a confining tier allows (workspace-write); "code" — an allow that rests on the tier to
    # confine the code it runs, which asks when no tier confines the filesystem.
    tier: str | None = None
    secret: bool = False           # reads secret-looking files or the environment (item 7: never with network)


def allow(reason: str) -> Finding:
    return Finding("allow", reason)


def ws_write(reason: str, **kw: object) -> Finding:
    """An ask that a confining tier turns into allow: the write stays inside the workspace."""
    return Finding("ask", reason, tier="write", **kw)  # type: ignore[arg-type]


def runs_code(reason: str) -> Finding:
    """An allow that holds only when an OS tier confines the code that runs."""
    return Finding("allow", reason, tier="code")


def ask(reason: str, **kw: object) -> Finding:
    return Finding("ask", reason, **kw)  # type: ignore[arg-type]


def deny(reason: str, **kw: object) -> Finding:
    return Finding("deny", reason, **kw)  # type: ignore[arg-type]


@dataclass
class Invocation:
    argv: list[Word]
    cwds: Cwds
    extra_args: bool = False       # more arguments arrive at run time (xargs, find -exec ... +)

    @property
    def name(self) -> str:
        return self.argv[0].value.rsplit("/", 1)[-1]

    @property
    def args(self) -> list[Word]:
        return self.argv[1:]

    @property
    def values(self) -> list[str]:
        return [w.value for w in self.argv[1:]]


class JudgeEnv(Protocol):
    paths: PathJudge
    # the workspace is snapshotted before the command (its files can be restored): a bool, or the watch's
    # Holdings (keel.trace.shellwatch), whose ``unheld(path, tree)`` says what it could not take first
    snapshot: Any
    # the workspace files the OS tier hides from commands (bubblewrap: .env files), None when it hides none
    tier_hidden: Callable[[], list[Path]] | None

    def sub_command(self, argv: list[Word], cwds: Cwds, extra_args: bool, label: str) -> str: ...

    def sub_code(self, code: Word, cwds: Cwds, label: str) -> str: ...

    def assignment(self, word: Word, cwds: Cwds, exported: bool = True) -> list[Finding]: ...


Judge = Callable[[Invocation, JudgeEnv], list[Finding]]


# -- writing and deleting --------------------------------------------------------------------

def judge_write(env: JudgeEnv, word: Word, cwds: Cwds, verb: str = "writes", *, replaces: bool = True) -> list[Finding]:
    """Escalations for writing ``word``: deny outside the workspace and into protected places.
    ``replaces``: the old bytes are gone after it (not an append)."""
    out: list[Finding] = []
    if word.value.rstrip("/").rpartition("/")[2].startswith("-"):
        env.paths.dash_names = True           # `touch ./-o; sort *`: a later glob can turn it into an option
    for place in env.paths.places(word, cwds):
        if env.paths.harmless_sink(place):
            continue
        protected = env.paths.protected_reason(place)
        if protected:
            out.append(deny(protected, destructive=True))
        elif place.where == "outside":
            out.append(deny(f"{verb} {word.value!r}, outside the workspace", destructive=True))
        elif place.where == "unknown":
            out.append(ask(f"{verb} {word.value!r}, a path only known when it runs", destructive=True))
        elif (later := env.paths.runs_later_reason(place)) is not None:
            out.append(ask(f"{verb} {word.value!r}: {later}", destructive=True))
        elif place.where == "inside":
            out.append(ws_write(f"{verb} {word.value!r}", destructive=True))
            out += unheld(env, place, word, verb, tree=False) if replaces else []
        else:
            out.append(ask(f"{verb} {word.value!r}", destructive=True))
    return out


def rewrites(inv: Invocation, env: JudgeEnv, targets: list[Word], what: str) -> list[Finding]:
    """A formatter or fixer rewriting files in place: a workspace write of each path it is given
    (the current directory when none), which a confining tier allows and the snapshot undoes."""
    out = [ws_write(f"{what} rewrites files in place", destructive=True)]
    for word in targets or [Word(".", ".")]:
        if all(p.where == "root" for p in env.paths.places(word, inv.cwds)):
            continue                       # the whole workspace: its files, each inside
        out += judge_write(env, word, inv.cwds, verb=f"{what} rewrites")
    return out


def unheld(env: JudgeEnv, place: Place, word: Word, verb: str, tree: bool) -> list[Finding]:
    """An ask when what ``place`` names (``tree``: and everything below it) would be lost beyond undo:
    the snapshot before the command (keel.trace.shellwatch.Holdings) takes it first when it can."""
    check = getattr(env.snapshot, "unheld", None)
    if check is None or place.real is None or place.where not in ("inside", "root"):
        return []
    why = check(place.real, tree or place.glob_tail)
    return [ask(f"{verb} {word.value!r}: {why}", destructive=True)] if why else []


def judge_delete(env: JudgeEnv, word: Word, cwds: Cwds, recursive: bool, verb: str = "delete") -> list[Finding]:
    out: list[Finding] = []
    what = "recursive " + verb if recursive else verb
    for place in env.paths.places(word, cwds):
        protected = env.paths.protected_reason(place)
        if protected:
            out.append(deny(protected, destructive=True))
        elif place.where == "outside":
            out.append(deny(f"{what} of {word.value!r}, outside the workspace", destructive=True))
        elif recursive and place.leading_unknown:
            out.append(deny(f"{what} of {word.value!r}, which starts with a variable that may be empty "
                            "or '/'", destructive=True))
        elif place.where == "root" and (recursive or not place.glob_tail):
            out.append(deny(f"{what} of the whole workspace ({word.value!r})", destructive=True))
        elif recursive and place.real is not None and place.real.name == ".git":
            out.append(deny(f"{what} of the git repository ({word.value!r})", destructive=True))
        elif place.where == "unknown" and recursive and place.glob_tail:
            out.append(deny(f"{what} of {word.value!r} in a directory only known when it runs",
                            destructive=True))
        elif place.where == "unknown":
            out.append(ask(f"{what} of {word.value!r}, a path only known when it runs", destructive=True))
        elif (later := env.paths.runs_later_reason(place)) is not None:
            out.append(ask(f"{what} of {word.value!r}: {later}", destructive=True))
        elif recursive and place.glob_tail and Path(place.text.rstrip("/")).name.startswith("."):
            out.append(ask(f"{what} of {word.value!r}, which can match .git", destructive=True))
        elif place.where == "inside" or (place.where == "root" and place.glob_tail):
            out.append(ws_write(f"{what} of {word.value!r}", destructive=True))
            out += unheld(env, place, word, what, tree=recursive)
        else:
            out.append(ask(f"{what} of {word.value!r}", destructive=True))
    return out


def _rm(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options(inv.name, inv.args)
    operands = parsed.operands
    if has(parsed, "--no-preserve-root"):
        return [deny("rm --no-preserve-root", destructive=True)]
    recursive = inv.name == "rm" and has(parsed, "-r", "-R", "--recursive")
    out = [ws_write(f"{inv.name} deletes files", destructive=True)]
    if inv.extra_args:
        out.append(ask(f"{inv.name} of paths only known when it runs", destructive=True))
    for word in operands:
        out += judge_delete(env, word, inv.cwds, recursive)
    if recursive and not env.snapshot and operands:
        # Nothing holds what it deletes (no snapshot: the workspace is over its cap, or snapshots are off).
        out.append(ask(f"{inv.name} -r deletes directories that no snapshot holds (keel undo could not bring "
                       "them back)", destructive=True))
    return out


def _shred(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    out = [ask("shred destroys file contents", destructive=True)]
    for word in options("shred", inv.args).operands:
        out += judge_delete(env, word, inv.cwds, recursive=False, verb="shred")
    return out


def _move_or_copy(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options(inv.name, inv.args)
    operands = parsed.operands
    targets = values_of(parsed, "-t", "--target-directory")
    if not targets and inv.name == "ln" and len(operands) == 1:
        targets = [Word(".", ".")]
    elif not targets and operands:
        targets, operands = operands[-1:], operands[:-1]
    generic = ws_write if inv.name in ("mv", "cp", "ln") else ask
    out = [generic(f"{inv.name} changes files", destructive=True)]
    if inv.name == "ln":
        # a link to a file outside the workspace would carry writes (a hard link) or reads out; a
        # symbolic link's text is resolved from the link's directory, not from here
        relative = has(parsed, "-s", "--symbolic") and not has(parsed, "-r", "--relative") and targets
        for word in (_from_link_dir(w, targets[0]) if relative else w for w in operands):
            if any(p.where not in ("inside", "root") for p in env.paths.places(word, inv.cwds)):
                out.append(ask(f"ln to {word.value!r}, which is not inside the workspace", destructive=True))
    for word in operands:
        if inv.name in ("mv", "cp") and any(p.where == "unknown" for p in env.paths.places(word, inv.cwds)):
            out.append(ask(f"{inv.name} of {word.value!r}, a path only known when it runs"))
    if inv.name == "mv":
        for word in operands:
            for place in env.paths.places(word, inv.cwds):
                if place.where == "outside":
                    out.append(deny(f"moves {word.value!r} from outside the workspace", destructive=True))
                elif place.where == "root" and not place.glob_tail:
                    out.append(deny("moves the whole workspace away", destructive=True))
                elif env.paths.protected_reason(place):
                    out.append(deny(f"moves {word.value!r} out of a protected place", destructive=True))
                else:    # the source's bytes leave: lost if no snapshot holds them
                    out += unheld(env, place, word, "moves", tree=True)
    for word in targets:
        out += judge_write(env, word, inv.cwds)
    if inv.name == "ln" and len(operands) == 1 and targets:      # symbolic or hard: writes go through it
        _remember_link(env, operands[0], targets[0], inv.cwds)
    return out


def _from_link_dir(source: Word, target: Word) -> Word:
    """``ln -s ../src dir/link``: the link points to ``dir/../src`` (a relative source is read from
    the directory the link is in)."""
    if not source.literal or source.value.startswith(("/", "~")):
        return source
    base = target.value if target.value.endswith("/") else target.value.rpartition("/")[0]
    if not base or base == ".":
        return source
    joined = f"{base.rstrip('/')}/{source.value}"
    return Word(joined, joined)


def _remember_link(env: JudgeEnv, source: Word, target: Word, cwds: Cwds) -> None:
    """``ln [-s] SOURCE TARGET``: later words through the new link resolve to SOURCE."""
    expanded = env.paths.expand(source)
    if not expanded or len(expanded) != 1:
        return
    for place in env.paths.places(target, cwds):
        if place.lexical is None:
            continue
        into_dir = target.value.endswith("/") or (place.real is not None and place.real.is_dir())
        link = place.lexical / Path(expanded[0]).name if into_dir else place.lexical
        env.paths.add_link(expanded[0], link)


def _make_targets(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """mkdir, touch, truncate, tee: every operand is written."""
    operands = options(inv.name, inv.args).operands
    out = [ws_write(f"{inv.name} writes files", destructive=inv.name != "mkdir")] if operands \
        else [allow("tee to stdout")]
    for word in operands:
        out += judge_write(env, word, inv.cwds)
    return out


def _change_mode(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options(inv.name, inv.args)
    operands = parsed.operands
    mode = ""
    if not has(parsed, "--reference") and operands:
        mode, operands = operands[0].value, operands[1:]
    recursive = has(parsed, "-R", "--recursive")
    special = inv.name == "chmod" and bool(re.search(r"[st]", mode.split("=")[-1]) if not mode.isdigit()
                                           else len(mode) == 4 and mode[0] != "0")
    generic = ws_write if inv.name == "chmod" and not special and not parsed.problem else ask
    why = "sets setuid, setgid or sticky bits" if special else "changes file permissions"
    out = [generic(f"{inv.name} {why}", destructive=True)]
    for word in operands:
        for place in env.paths.places(word, inv.cwds):
            protected = env.paths.protected_reason(place)
            if protected:
                out.append(deny(f"{inv.name} on {word.value!r}: {protected}", destructive=True))
            elif place.where == "outside":
                out.append(deny(f"{inv.name}{' -R' if recursive else ''} on {word.value!r}, outside the workspace",
                                destructive=True))
            elif place.where == "unknown" and recursive and place.leading_unknown:
                out.append(deny(f"{inv.name} -R on {word.value!r}, which may be '/'", destructive=True))
            elif place.where == "unknown":
                out.append(ask(f"{inv.name} on {word.value!r}, a path only known when it runs", destructive=True))
            elif (later := env.paths.runs_later_reason(place)) is not None:
                out.append(ask(f"{inv.name} on {word.value!r}: {later}", destructive=True))
    return out


def _dd(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    out = [ask("dd copies raw data", destructive=True)]
    for word in inv.args:
        if word.value.startswith("of="):
            target = Word(word.value[3:], word.value[3:], word.params, word.subs)
            out += judge_write(env, target, inv.cwds)
    return out


def _read_only(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    return [allow(f"{inv.name} only reads")]


def _read_only_output(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """A reader that may write a file: sort -o, tree -o (their ``=W`` options, judged with every
    command's options), uniq IN OUT and xxd IN OUT (the second operand)."""
    operands = options(inv.name, inv.args).operands
    out = [allow(f"{inv.name} only reads")]
    if inv.name in ("uniq", "xxd") and len(operands) >= 2:
        out += judge_write(env, operands[1], inv.cwds)
    return out


def _setter(what: str, setting: set[str], operands_set: bool = False) -> Judge:
    """file/date/hostname: read-only unless an option (or any operand) changes the system."""

    def judge(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
        parsed = options(inv.name, inv.args)
        if has(parsed, *setting) or (operands_set and parsed.operands):
            return [ask(f"{inv.name} {what}")]
        return [allow(f"{inv.name} only reads")]

    return judge


READ_ONLY = ("ls", "cat", "head", "tail", "wc", "pwd", "echo", "true", "false", "which", "type", "stat", "du",
             "df", "diff", "cmp", "cut", "tr", "nl", "basename", "dirname", "realpath", "readlink", "whoami",
             "uname", "grep", "egrep", "fgrep", "jq", "env", "test", "[", "[[", ":", "seq", "expr", "sleep", "id",
             "printenv", "md5sum", "sha1sum", "sha256sum", "sha512sum", "b2sum", "cksum", "column", "paste",
             "comm", "join", "fold", "rev", "od", "hexdump", "strings", "tac", "cd", "pushd", "popd", "dirs",
             "set", "unset", "exit", "return", "break", "continue", "shift", "wait", "jobs", "nproc", "locale", "fmt", "expand", "unexpand",
             "numfmt", "getconf", "unalias")

JUDGES: dict[str, Judge] = {name: _read_only for name in READ_ONLY}
JUDGES.update({
    "sort": _read_only_output, "tree": _read_only_output, "shuf": _read_only_output, "uniq": _read_only_output,
    "xxd": _read_only_output,
    "file": _setter("compiles a magic file", {"-C", "--compile"}),
    "date": _setter("sets the clock", {"-s", "--set"}),
    "hostname": _setter("sets the host name", {"-F", "--file"}, operands_set=True),
    "rm": _rm, "unlink": _rm, "rmdir": _rm, "shred": _shred,
    "mv": _move_or_copy, "cp": _move_or_copy, "ln": _move_or_copy, "install": _move_or_copy,
    "mkdir": _make_targets, "touch": _make_targets, "truncate": _make_targets, "tee": _make_targets,
    "chmod": _change_mode, "chown": _change_mode, "chgrp": _change_mode, "dd": _dd,
})
