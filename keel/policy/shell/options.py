"""Allow only on positive knowledge: every option a command gets must be on its list of known-safe
options, spelled exactly (docs/policy.md, section 5).

The lists live in ``optlists.py``, one per command (``git log``, ``go run`` and ``python -m pytest``
have their own). An option not on the list — an abbreviation (``--outp`` for ``--output``), an
unknown option, an unknown ``--opt=value`` form, an option built at run time (``ls $OPTS``) —
asks. A command without a list knows no options at all. What an option's value names is judged
too: ``--output=F``-style options are marked ``=W`` and their value is judged as a write.

Shell builtins whose judges read every flag that matters (``declare -n``, ``set -k``,
``read``/``printf -v``, ``hash -p``) and that open no files are not listed here (``FREE``).
"""

from __future__ import annotations

import glob as globbing
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from keel.policy.shell.commands import Finding, Invocation, ask, judge_write
from keel.policy.shell.optlists import LISTS
from keel.policy.shell.parse import Word
from keel.policy.shell.unwrap import SHELLS

if TYPE_CHECKING:
    from keel.policy.shell.commands import JudgeEnv

# Builtins and commands that open no files and run nothing through their options; their
# judges (system.py) read the flags that matter. `[`/`test`/`expr` take expressions, not options.
FREE = frozenset({"echo", "printf", "test", "[", "[[", "]]", ":", "true", "false", "exit", "return", "break",
                  "continue", "shift", "wait", "jobs", "expr", "set", "unset", "cd", "pushd", "popd", "dirs",
                  "export", "declare", "typeset", "local", "readonly", "read", "trap", "shopt", "hash", "alias",
                  "unalias", "type", "eval", "source", ".", "command", "builtin", "exec", "enable", "history",
                  "kill", "pkill", "killall", "env", "xargs", *SHELLS})
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?|pypy3?")
# Tools with subcommands whose lists differ by subcommand (`go run` stops at its program).
_SUBCOMMAND_TOOLS = frozenset({"git", "go", "cargo", "npm", "yarn", "pnpm", "pip", "pip3", "ruff", "coverage",
                               "apt", "apt-get", "brew", "dnf", "yum", "apk", "pacman", "zypper", "snap", "gem",
                               "conda", "mamba", "bundle"})


@dataclass(frozen=True)
class OptionList:
    """One command's known-safe options, parsed from its spec text (see ``optlists.py``)."""

    flags: frozenset[str]          # take no value
    valued: frozenset[str]         # take a value, attached (--x=v, -xv) or as the next word
    optional: frozenset[str]       # take a value only when attached (--color[=WHEN], sed -i[SUFFIX])
    writes: frozenset[str]         # valued options whose value is a path the tool writes
    pairs: frozenset[str]          # take two words (jq --arg NAME VALUE)
    colon: frozenset[str]          # a value KIND:PATH writes PATH (--cov-report=html:DIR)
    configs: frozenset[str]        # configuration (which can load plugins): must be inside the workspace
    numeric: bool = False          # -NUM is a count (head -5, git log -3)
    single_dash: bool = False      # -name and --name are one long option, no clusters (go, find)
    stop_at_operand: bool = False  # the first operand ends the options (node FILE args ...)
    any_word: bool = False         # every option is harmless and no file is opened (seq, sleep): a word
                                   # built at run time may be anything

    @classmethod
    def parse(cls, spec: str) -> OptionList:
        flags, valued, optional, writes, pairs, colon, configs = set(), set(), set(), set(), set(), set(), set()
        numeric = single = stop = any_word = False
        for token in spec.split():
            if token == "-NUM":
                numeric = True
            elif token == "SINGLE":
                single = True
            elif token == "STOP":
                stop = True
            elif token == "ANY":
                any_word = True
            elif token.endswith("=?"):
                optional.add(token[:-2])
            elif token.endswith("=C"):
                valued.add(token[:-2])
                configs.add(token[:-2])
            elif token.endswith("=W:"):
                valued.add(token[:-3])
                colon.add(token[:-3])
            elif token.endswith("=W"):
                valued.add(token[:-2])
                writes.add(token[:-2])
            elif token.endswith("=2"):
                pairs.add(token[:-2])
            elif token.endswith("="):
                valued.add(token[:-1])
            else:
                flags.add(token)
        if not single:
            flags |= {"--help", "--version"}
        return cls(frozenset(flags), frozenset(valued), frozenset(optional), frozenset(writes), frozenset(pairs),
                   frozenset(colon), frozenset(configs), numeric, single, stop, any_word)

    @property
    def known(self) -> frozenset[str]:
        return self.flags | self.valued | self.optional | self.pairs


_PARSED: dict[str, OptionList] = {}
_EMPTY = OptionList.parse("")


def option_list(key: str) -> OptionList | None:
    if key not in LISTS:
        return None
    if key not in _PARSED:
        _PARSED[key] = OptionList.parse(LISTS[key])
    return _PARSED[key]


@dataclass
class Scan:
    problem: str | None = None                    # why the options are not known-safe
    writes: list[tuple[str, Word]] | None = None  # (option, the path it writes); ("config OPT", path)


def scan(spec: OptionList, args: list[Word]) -> Scan:
    """Walk ``args`` against ``spec``; stop at the first option that is not known-safe."""
    writes: list[tuple[str, Word]] = []
    i = 0
    while i < len(args):
        word = args[i]
        text = word.value
        if text == "--":
            break
        if not word.literal and _may_be_option(word) and not spec.any_word:
            return Scan(f"{word.raw!r} may expand to an option, only known when it runs", writes)
        dashed = text.startswith("-") and text != "-"
        if dashed and (text.startswith("--") or spec.single_dash) and len(text) > 2:
            name, eq, value = text.partition("=")
            if spec.single_dash and name.startswith("--"):
                name = name[1:]
            if eq:
                if name not in spec.valued | spec.optional and not (spec.single_dash and name in spec.flags):
                    return Scan(f"{name}={value} is not on the list of known-safe options", writes)
                if name in spec.configs:
                    writes.append(("config " + name, Word(value, value, word.params, word.subs)))
                if name in spec.writes or (name in spec.colon and ":" in value):
                    value = value.split(":", 1)[1] if name in spec.colon else value
                    writes.append((name, Word(value, value, word.params, word.subs)))
            elif name in spec.valued or name in spec.pairs:
                take = 2 if name in spec.pairs else 1
                if i + 1 < len(args) and name in spec.configs:
                    writes.append(("config " + name, args[i + 1]))
                if i + 1 < len(args) and (name in spec.writes or (name in spec.colon and ":" in args[i + 1].value)):
                    target = args[i + 1]
                    if name in spec.colon:
                        text = target.value.split(":", 1)[1]
                        target = Word(text, text, target.params, target.subs)
                    writes.append((name, target))
                i += take
            elif name not in spec.flags and name not in spec.optional:
                return Scan(f"option {name!r} is not on the list of known-safe options (spelled exactly)", writes)
        elif dashed and spec.numeric and re.fullmatch(r"-\d+", text):
            pass
        elif dashed:
            problem, consumed = _cluster(spec, text, args[i + 1] if i + 1 < len(args) else None, writes)
            if problem:
                return Scan(problem, writes)
            i += consumed
        elif spec.stop_at_operand:
            break
        i += 1
    return Scan(None, writes)


def _cluster(spec: OptionList, text: str, following: Word | None,
             writes: list[tuple[str, Word]]) -> tuple[str | None, int]:
    """``-la``, ``-n5``, ``-o FILE``: short options in a row; returns (problem, extra words used)."""
    for j, ch in enumerate(text[1:], start=1):
        opt = "-" + ch
        if opt in spec.flags:
            continue
        if opt in spec.optional:
            return None, 0
        if opt in spec.valued:
            rest = text[j + 1:]
            if opt in spec.configs and (rest or following is not None):
                writes.append(("config " + opt, Word(rest, rest) if rest else following))  # type: ignore[arg-type]
            if rest:
                if opt in spec.writes:
                    writes.append((opt, Word(rest, rest)))
                return None, 0
            if opt in spec.writes and following is not None:
                writes.append((opt, following))
            return None, 1
        if spec.numeric and ch.isdigit() and text[j:].isdigit():
            return None, 0
        return f"option {opt!r} (in {text!r}) is not on the list of known-safe options", 0
    return None, 0


def _may_be_option(word: Word) -> bool:
    """A word whose first characters come from an expansion could start with a dash."""
    if word.raw.lstrip("\"'").startswith(tuple("-+")) or re.match(r"\$\{?(HOME|PWD|OLDPWD)\b", word.value):
        return False                  # an absolute path never starts with a dash
    return word.value.startswith(("$", "`")) or word.raw.lstrip("\"").startswith(("$", "`"))


def resolve(inv: Invocation) -> tuple[str, OptionList, list[Word]] | None:
    """The list that applies to ``inv`` and the words it covers; None for FREE commands and for
    arguments that belong to a program, not to the command (``python script.py ARGS``)."""
    name = inv.name
    args = inv.args
    if name in FREE:
        return None
    if _PYTHON.fullmatch(name):
        return _python(inv)
    if name in _SUBCOMMAND_TOOLS:
        key = name
        if name == "git":
            sub_at = _git_subcommand(args)
            if sub_at is None:
                return "git", option_list("git") or _EMPTY, args
            key, args = f"git {args[sub_at].value}", args[sub_at + 1:]
            spec = option_list(key)
            return key, spec or _EMPTY, args
        at = next((i for i, w in enumerate(args) if not w.value.startswith(("-", "+"))), None)
        if at is not None and option_list(f"{name} {args[at].value}") is not None:
            key = f"{name} {args[at].value}"
            args = args[:at] + args[at + 1:]          # the subcommand word itself
        if name == "go":
            args = args[:[w.value for w in args].index("-args")] if "-args" in [w.value for w in args] else args
        return key, option_list(key) or _EMPTY, args
    spec = option_list(name)
    return name, spec or _EMPTY, args


def _git_subcommand(args: list[Word]) -> int | None:
    i = 0
    while i < len(args) and args[i].value.startswith("-"):
        i += 2 if args[i].value in ("-c", "-C", "--git-dir", "--work-tree", "--namespace") else 1
    return i if i < len(args) else None


def _python(inv: Invocation) -> tuple[str, OptionList, list[Word]] | None:
    """``python [opts] -m MODULE args``: the module's list covers its args; ``-c``/a script: the
    interpreter's own options only (what follows belongs to the program)."""
    args = inv.args
    for i, word in enumerate(args):
        text = word.value
        if "pycache_prefix" in text and (text.startswith("-X") or (i and args[i - 1].value == "-X")):
            return "python", _EMPTY, [Word("-X pycache_prefix", text)]   # writes .pyc files elsewhere
        m = re.fullmatch(r"-[A-Za-z]*m(.*)", text)
        if m:
            module = m.group(1) or (args[i + 1].value if i + 1 < len(args) else "")
            rest = args[i + 1:] if m.group(1) else args[i + 2:]
            own = scan(option_list("python") or _EMPTY, args[:i])
            if own.problem:
                return "python", option_list("python") or _EMPTY, args[:i]
            spec = option_list(module)
            if spec is None:
                return None            # python -m PKG: the package's own arguments
            return resolve(Invocation([Word(module, module)] + rest, inv.cwds, inv.extra_args))
        if re.fullmatch(r"-[A-Za-z]*c.*", text) or text == "-" or not text.startswith("-"):
            return "python", option_list("python") or _EMPTY, args[:i]
    return "python", option_list("python") or _EMPTY, args


def _glob_options(env: JudgeEnv, inv: Invocation, args: list[Word]) -> str | None:
    """``sort *`` with a file named ``--output=…`` in the directory: the glob becomes an option."""
    for word in args:
        if word.value == "--":
            return None
        name = word.value.rpartition("/")[2]
        if not word.glob or name[:1] not in ("*", "?", "["):
            continue
        if env.paths.dash_names:
            return f"the glob {word.value!r} may match a file this line names with a leading '-' (an option)"
        for cwd in inv.cwds:
            base = Path(word.value) if word.value.startswith("/") else (cwd or Path("/nonexistent")) / word.value
            if cwd is None or any(Path(m).name.startswith("-") for m in itertools.islice(
                    globbing.iglob(str(base), include_hidden=True), 2000)):
                return f"the glob {word.value!r} matches a file whose name starts with '-' (an option)"
    return None


def known_options(env: JudgeEnv, inv: Invocation) -> list[Finding]:
    """Ask unless every option is on the command's list; judge the paths ``=W`` options write."""
    found = resolve(inv)
    if found is None:
        return []
    key, spec, args = found
    result = scan(spec, args)
    out: list[Finding] = [ask(f"{key}: {why}")] if (why := _glob_options(env, inv, args)) else []
    for name, target in result.writes or []:
        if name.startswith("config "):
            if any(p.where not in ("inside", "root") for p in env.paths.places(target, inv.cwds)):
                out.append(ask(f"{key} {name[7:]} {target.value!r}: configuration from outside the workspace "
                               "(it can load plugins)"))
        else:
            out += judge_write(env, target, inv.cwds, verb=f"{key} {name} writes")
    if result.problem:
        out.append(ask(f"{key}: {result.problem}"))
    return out
