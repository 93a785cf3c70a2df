"""git: read-only subcommands are allowed; anything that writes asks; configuration that makes
git run programs (hooks, fsmonitor, pager, ssh command, textconv, filters, aliases...) is
refused however it is set (``-c``, ``--config-env``, ``git config``, ``clone --config``).
"""

from __future__ import annotations

import re
from pathlib import Path

from keel.policy.shell.commands import (
    Finding,
    Invocation,
    Judge,
    JudgeEnv,
    allow,
    ask,
    deny,
    judge_write,
    ws_write,
)
from keel.policy.shell.facts import EMPTY, parse, table, values_of
from keel.policy.shell.gitrepo import configured_programs
from keel.policy.shell.parse import Word
from keel.policy.shell.secrets import tracked_secret

# Config keys (lower-cased; subsections as .*) whose value git executes or that point git at code.
_EXEC_KEYS = re.compile(
    r"core\.(hookspath|fsmonitor|sshcommand|pager|editor|gitproxy|askpass|worktree|alternaterefscommand)"
    r"|diff\.external|credential(\..*)?\.helper|sequence\.editor|gpg(\..*)?\.program|uploadpack\.packobjectshook"
    r"|include\.path|includeif\..*\.path|web\.browser|interactive\.difffilter|pager\..*|alias\..*"
    r"|diff\..*\.(textconv|command)|filter\..*\.(clean|smudge|process)|merge\..*\.driver"
    r"|remote\..*\.(uploadpack|receivepack|proxy)|url\..*\.(insteadof|pushinsteadof)|protocol\..*\.allow"
    r"|(mergetool|difftool|browser|man)\..*\.(cmd|path)|sendemail\..*|submodule\..*\.update|core\.attributesfile"
    r"|init\.templatedir|receive\.procreceiverefs|blame\.ignorerevsfile|http\..*\.(sslkey|proxy)"
)

_READ_ONLY = frozenset({"status", "diff", "log", "show", "blame", "annotate", "rev-parse", "ls-files", "ls-tree",
                        "cat-file", "grep", "describe", "shortlog", "rev-list", "name-rev", "merge-base",
                        "count-objects", "show-ref", "for-each-ref", "check-ignore", "check-attr", "whatchanged",
                        "cherry", "version", "var", "diff-tree", "diff-files", "diff-index", "range-diff",
                        "show-branch", "help", "fsck", "show-index"})
_NETWORK = frozenset({"push", "pull", "fetch", "clone", "ls-remote", "submodule", "archive", "send-email",
                      "request-pull", "remote"})
_GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--bare", "--no-replace-objects", "--literal-pathspecs",
                           "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks",
                           "--no-advice", "--version", "--help", "-h", "--no-lazy-fetch"})


# Local repository changes a confining tier allows unasked (workspace-write) when every option is
# on the subcommand's known-safe list in facts.toml, spelled exactly. Anything else (an editor, -i,
# --exec, gpg signing, an abbreviation) keeps asking.
_LOCAL = frozenset({"add", "commit", "checkout", "switch", "stash", "restore", "branch", "merge", "rebase"})
_MERGE_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})
_STASH_SUBS = frozenset({"push", "pop", "apply", "drop", "save", "clear", "branch", "create", "store"})


def _local_write(sub: str, rest: list[Word]) -> Finding:
    """A local git change: workspace-write when every option is known-safe (facts.toml)."""
    words = rest[1:] if sub == "stash" and rest and rest[0].value in _STASH_SUBS else rest
    parsed = parse(table().spec(f"git {sub}") or EMPTY, words)
    if parsed.problem:
        return ask(f"git {sub}: {parsed.problem}", destructive=True)
    for value in values_of(parsed, "-s", "--strategy"):
        if value.value not in _MERGE_STRATEGIES:
            return ask(f"git {sub} --strategy {value.value!r} runs a program", destructive=True)
    return ws_write(f"git {sub} changes the local repository", destructive=True)


def config_key_risk(assignment: str) -> Finding:
    """``key=value`` as given to ``git -c`` / ``clone --config``."""
    key = assignment.split("=", 1)[0].strip().lower()
    if _EXEC_KEYS.fullmatch(key):
        return deny(f"git config {key} makes git run a program")
    return ask(f"git -c {key} changes git's configuration for this command")


def _global_options(inv: Invocation, env: JudgeEnv, out: list[Finding]) -> int | None:
    """Judge options before the subcommand; return the index of the subcommand or None."""
    args = inv.args
    i = 0
    while i < len(args) and args[i].value.startswith("-"):
        value = args[i].value
        name, eq, attached = value.partition("=")
        if value == "-c" or name == "--config-env":
            setting = attached if eq else (args[i + 1].value if i + 1 < len(args) else "")
            out.append(config_key_risk(setting))
            i += 1 if eq else 2
        elif value == "-C":
            if i + 1 < len(args):
                places = env.paths.places(args[i + 1], inv.cwds)
                if any(p.where not in ("inside", "root") for p in places):
                    out.append(ask(f"git -C {args[i + 1].value!r} works on a repository outside the workspace"))
            i += 2
        elif name in ("--git-dir", "--work-tree", "--namespace", "--exec-path", "--super-prefix"):
            out.append(ask(f"git {name} points git at other files or programs"))
            i += 1 if (eq or name == "--exec-path") else 2
        elif value in ("-p", "--paginate"):
            out.append(ask("git --paginate runs the configured pager"))
            i += 1
        elif value in _GLOBAL_FLAGS:
            i += 1
        else:
            out.append(ask(f"git option {value!r} is not understood"))
            return None
    return i


_PATCH_ALWAYS = frozenset({"show", "diff", "range-diff"})
_PATCH_ON_REQUEST = frozenset({"log", "whatchanged", "reflog", "diff-tree", "diff-index", "diff-files", "stash"})
_PATCH_FLAGS = re.compile(r"-p|-u|--patch|-U\d*|--unified(=.*)?|--word-diff(=.*)?|--color-words(=.*)?|-W"
                          r"|--function-context|--patch-with-stat|--patch-with-raw|--cc|-c|--full-diff")
_NO_PATCH = re.compile(r"--stat(=.*)?|--name-only|--name-status|--numstat|--shortstat|--no-patch|-s|--quiet"
                       r"|--exit-code|--summary|--raw|--dirstat(=.*)?|--compact-summary|--check")


def shows_contents(sub: str, values: list[str]) -> bool:
    """Does ``git SUB VALUES`` print file contents (a patch, a blob)?"""
    if sub == "cat-file":
        return any(v in ("-p", "blob", "--batch") or v.startswith("--batch") for v in values) and any(
            re.fullmatch(r"[0-9a-fA-F]{4,64}", v) for v in values)
    if sub in _PATCH_ALWAYS:
        shows = not any(_NO_PATCH.fullmatch(v) for v in values) or any(_PATCH_FLAGS.fullmatch(v) for v in values)
        revs = [v for v in (values[:values.index("--")] if "--" in values else values) if not v.startswith("-")]
        return shows and not (sub == "show" and revs and all(":" in v for v in revs))  # REV:PATH: that file only
    if sub in _PATCH_ON_REQUEST:
        return any(_PATCH_FLAGS.fullmatch(v) or re.fullmatch(r"-p\w*|-\w*p", v) for v in values)
    return sub in ("blame", "annotate")


def tracked_secret_shown(sub: str, rest: list[Word], inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """``git show``, ``git log -p``, ``git cat-file -p SHA``: file contents from the repository,
    among them a tracked secret-looking file unless a pathspec leaves it out."""
    values = [w.value for w in rest]
    if sub in ("blame", "annotate") or not shows_contents(sub, values):
        return []
    for cwd in inv.cwds or {None}:
        if cwd is None:
            continue
        secret = tracked_secret(cwd)
        if secret is None:
            continue
        repo = next(d for d in (cwd, *cwd.parents) if (d / ".git").exists())
        pathspec = [w for w in rest[values.index("--") + 1:]] if "--" in values else []
        if pathspec and all(w.literal and not w.glob and all(
                p.real is not None and not _contains(p.real, repo / secret) for p in env.paths.places(w, inv.cwds))
                for w in pathspec):
            continue
        return [ask(f"git {sub} shows file contents from the repository, which tracks {secret}, a secret-looking "
                    "file (name the paths after --)", lift=None, secret=True)]
    return []


def _contains(parent: Path, child: Path) -> bool:
    return child == parent or parent in child.parents


def repository_programs(sub: str, rest: list[Word], inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """``git diff`` in a repository whose config sets diff.external, a textconv driver, core.fsmonitor …"""
    values = inv.values
    before = values[:values.index(sub)] if sub in values else values
    dirs: set[Path | None] = set(inv.cwds)
    if before.count("-C") == 1:                 # git -C DIR: the repository of DIR
        dirs = {p.real for p in env.paths.places(inv.args[before.index("-C") + 1], inv.cwds)}
    elif before.count("-C") > 1:
        dirs = {None}
    own = [w.value for w in rest]
    patch = shows_contents(sub, own[1:] if sub == "stash" else own)      # git stash show -p
    for directory in dirs:
        why = configured_programs(directory, sub, set(own), patch)
        if why is not None:
            return [ask(f"git {sub} may run a program: {why}")]
    return []


def _read_only_args(sub: str, rest: list[Word], inv: Invocation, env: JudgeEnv) -> list[Finding]:
    out: list[Finding] = tracked_secret_shown(sub, rest, inv, env) + repository_programs(sub, rest, inv, env)
    for i, word in enumerate(rest):
        value = word.value
        name, eq, attached = value.partition("=")
        if name == "--output":
            target = Word(attached, attached, word.params, word.subs) if eq else (rest[i + 1] if i + 1 < len(rest) else None)
            if target is not None:
                out += judge_write(env, target, inv.cwds)
        elif name in ("--ext-diff", "--textconv", "--filters") or (sub == "grep" and (
                name in ("-O", "--open-files-in-pager") or value.startswith("-O"))):
            out.append(ask(f"git {sub} {name} runs configured programs"))
        elif sub == "help" and name in ("-w", "--web", "-i", "--info", "-m", "--man"):
            out.append(ask("git help opens a browser or viewer"))
        elif name == "--show-signature" or (name in ("--format", "--pretty") and "%G" in attached):
            out.append(ask(f"git {sub} runs gpg to check signatures (gpg reads the user's keyrings)"))
    return out


def _listing(sub: str, rest: list[Word], destructive_flags: set[str], list_flags: set[str]) -> Finding:
    """branch/tag: listing is read-only; any create/delete/rename flag or a bare name asks."""
    values = [w.value for w in rest]
    end = values.index("--") if "--" in values else len(values)
    flags = [v.split("=", 1)[0] for v in values[:end] if v.startswith("-")]
    if any(f in destructive_flags or re.fullmatch(r"-[a-zA-Z]*[dDmMcCfsau][a-zA-Z]*", f) and f not in list_flags
           for f in flags):
        return ask(f"git {sub} {' '.join(values)} changes {sub}es", destructive=True)
    if values[end + 1:]:                     # `git branch -- --list`: after `--` a word is a name, never an option
        return ask(f"git {sub} {values[end + 1]!r} may create a {sub}")
    positional = [v for v in values[:end] if not v.startswith("-")]
    if positional and not any(f in ("--list", "-l", "--contains", "--no-contains", "--merged", "--no-merged",
                                    "--points-at") for f in flags):
        return ask(f"git {sub} {positional[0]!r} creates a {sub}")
    return allow(f"git {sub} lists")


def _config(rest: list[Word]) -> Finding:
    values = [w.value for w in rest]
    readers = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--show-origin",
               "--show-scope", "--name-only", "get", "list"}
    writers = {"--add", "--replace-all", "--unset", "--unset-all", "--rename-section", "--remove-section",
               "-e", "--edit", "set", "unset", "edit", "rename-section", "remove-section"}
    positional: list[str] = []
    skip = False
    for v in values:                       # option values are not the key: --file F, --type T ...
        if skip:
            skip = False
        elif v in ("-f", "--file", "--blob", "--type", "--default", "--comment", "--value"):
            skip = True
        elif not v.startswith("-") and v not in readers | writers:
            positional.append(v)
    writing = bool(set(values) & writers) or (len(positional) >= 2 and not set(values) & readers)
    if not writing:
        return allow("git config only reads")
    if positional and _EXEC_KEYS.fullmatch(positional[0].lower()):
        return deny(f"git config {positional[0]} makes git run a program")
    return ask("git config changes the repository's configuration")


def _git(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    out: list[Finding] = []
    index = _global_options(inv, env, out)
    if index is None:
        return out
    args = inv.args
    if index >= len(args):
        return out + [allow("git prints help")]
    sub, rest = args[index].value, args[index + 1:]
    values = [w.value for w in rest]
    for value in values:
        if value.startswith(("ext::", "fd::")) or "::ext::" in value:
            out.append(deny("git ext:: transport runs a command"))
        name, _, setting = value.partition("=")
        if name in ("--upload-pack", "-u", "--receive-pack", "--exec") and sub in _NETWORK | {"archive"}:
            out.append(deny(f"git {sub} {name} runs a program"))
        if name in ("--config", "-c") and sub == "clone":
            out.append(config_key_risk(setting or (values[values.index(value) + 1] if value in values[:-1] else "")))
        if name == "--template" and sub in ("clone", "init"):
            out.append(deny(f"git {sub} --template can install hooks"))
    if sub in ("verify-commit", "verify-tag"):
        return out + [ask(f"git {sub} runs gpg to check signatures (gpg reads the user's keyrings)")]
    if sub in _READ_ONLY:
        tokens = [Finding("allow", "git var prints configuration that may hold tokens", secret=True)] \
            if sub == "var" else []
        return out + [allow(f"git {sub} only reads")] + _read_only_args(sub, rest, inv, env) + tokens
    if (lost := _destroys_history(sub, values)) is not None:
        return out + [ask(lost, destructive=True)]
    if sub == "clean" and env.snapshot and all(
            re.fullmatch(r"-[fdqn]+|--force|--quiet|--dry-run", v) for v in values):
        # Not with -x/-X: ignored directories (build/, .venv, node_modules) are not in the snapshot.
        return out + [ws_write("git clean deletes untracked files (the snapshot taken before the command keeps "
                               "them)", destructive=True)]
    listing = (sub == "branch" and _listing("branch", rest, set(), {"-a", "-r", "-v", "-vv", "-l", "-i"}).decision
               == "allow") or (sub == "stash" and values[:1] in (["list"], ["show"]))
    if sub in _LOCAL and not listing:
        return out + [_local_write(sub, rest)] + _rebase_exec(sub, rest, values, inv, env) + \
            _restored_paths(sub, rest, values, inv, env)
    if sub == "branch":
        return out + [_listing("branch", rest, {"--delete", "--move", "--copy", "--set-upstream-to",
                                                "--unset-upstream", "--edit-description", "--force", "--track",
                                                "--no-track", "--create-reflog"}, {"-a", "-r", "-v", "-vv", "-l", "-i"})]
    if sub == "tag":
        return out + [_listing("tag", rest, {"--delete", "--annotate", "--sign", "--message", "--file",
                                             "--force", "--local-user"}, {"-l", "-n", "-i"})]
    # remote URLs and config values can hold tokens (https://user:TOKEN@host, http.extraHeader)
    holds_tokens = Finding("allow", f"git {sub} prints configuration that may hold tokens", secret=True)
    if sub == "config":
        verdict = _config(rest)
        return out + [verdict] + ([holds_tokens] if verdict.decision == "allow" else [])
    if sub == "remote" and (not values or values in (["-v"], ["--verbose"]) or values[:1] == ["get-url"]):
        return out + [allow("git remote lists remotes"), holds_tokens]
    if sub in ("stash", "worktree", "notes") and values[:1] in (["list"], ["show"]):
        return out + [allow(f"git {sub} {values[0]} only reads")] + tracked_secret_shown(sub, rest, inv, env) + \
            (repository_programs(sub, rest, inv, env) if sub == "stash" and values[0] == "show" else [])
    if sub == "reflog" and (not values or values[0] == "show" or values[0].startswith("-")):
        return out + [allow("git reflog only reads")] + tracked_secret_shown(sub, rest, inv, env)
    if sub == "submodule" and "foreach" in values:
        code = rest[values.index("foreach") + 1:]
        code = [w for w in code if w.value not in ("--recursive", "-q", "--quiet")]
        if code:
            env.sub_code(_joined(code), inv.cwds, "git submodule foreach")
    return out + _rebase_exec(sub, rest, values, inv, env) + _other(sub)


def _restored_paths(sub: str, rest: list[Word], values: list[str], inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """``git checkout REV -- .husky/pre-commit``, ``git restore .envrc``: the named paths are written."""
    if sub == "checkout" and "--" in values:
        paths = rest[values.index("--") + 1:]
    elif sub == "restore":
        paths = [w for i, w in enumerate(rest) if not w.value.startswith("-") and w.value != "--"
                 and (i == 0 or rest[i - 1].value not in ("-s", "--source"))]
    else:
        return []
    out: list[Finding] = []
    for word in paths:
        out += [f for f in judge_write(env, word, inv.cwds, verb=f"git {sub} writes") if f.decision != "allow"
                and f.tier != "write"]
    return out


def _rebase_exec(sub: str, rest: list[Word], values: list[str], inv: Invocation, env: JudgeEnv) -> list[Finding]:
    if sub == "rebase":
        for i, value in enumerate(values):
            if value in ("-x", "--exec") and i + 1 < len(rest):
                env.sub_code(rest[i + 1], inv.cwds, "git rebase --exec")
            elif value.startswith("--exec="):
                text = value.split("=", 1)[1]
                env.sub_code(Word(text, text, rest[i].params, rest[i].subs), inv.cwds, "git rebase --exec")
        if any(v in ("-i", "--interactive", "-x", "--exec") or v.startswith("--exec=") for v in values):
            return [ask("git rebase --interactive/--exec runs an editor or commands")]
    if sub == "bisect" and values[:1] == ["run"] and len(rest) > 1:
        env.sub_command(rest[1:], inv.cwds, False, "git bisect run")
    return []


def _other(sub: str) -> list[Finding]:
    network = sub in _NETWORK
    return [ask(f"git {sub} changes the repository" if not network else f"git {sub} uses the network",
                network=network, destructive=sub in ("reset", "clean", "checkout", "restore", "push",
                                                     "rebase", "stash", "rm", "filter-branch"))]


def _destroys_history(sub: str, values: list[str]) -> str | None:
    """Git data no workspace snapshot holds (refs, stashes, reflogs, unreachable objects): always asks."""
    flags = {v.split("=", 1)[0] for v in values if v.startswith("-")}
    short = "".join(v[1:] for v in values if re.fullmatch(r"-[a-zA-Z]+", v))
    first = values[0] if values else ""
    if sub == "stash" and first in ("clear", "drop"):
        return f"git stash {first} deletes stashed work, which cannot be recovered"
    if sub == "branch" and ("D" in short or "M" in short or "C" in short or (
            flags & {"--delete", "--move", "--copy", "-d", "-m", "-c"} and flags & {"--force", "-f"})):
        return "git branch -D/-M deletes or overwrites a branch whether or not its commits are kept elsewhere"
    if (sub == "reflog" and first in ("expire", "delete")) or sub == "prune" or (
            sub == "gc" and any(v.startswith("--prune") for v in values)):
        return f"git {sub} {first} drops unreachable commits and reflog entries, the only copy of lost work"
    if sub == "update-ref" and flags & {"-d", "--stdin"}:
        return "git update-ref deletes or rewrites refs"
    if sub == "worktree" and first == "remove" and flags & {"-f", "--force"}:
        return "git worktree remove --force deletes a worktree with uncommitted changes"
    if sub in ("symbolic-ref", "replace", "notes") and flags & {"-d", "--delete"}:
        return f"git {sub} -d deletes refs"
    return None


def _joined(words: list[Word]) -> Word:
    text = " ".join(w.value for w in words)
    return Word(text, text, tuple(p for w in words for p in w.params), tuple(s for w in words for s in w.subs))


JUDGES: dict[str, Judge] = {"git": _git}
