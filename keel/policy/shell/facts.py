"""Command facts: the commands and options the shell policy knows, as data (``facts.toml``), read
through one option parser, with examples checked when the table loads (as Codex's execpolicy keeps
``match``/``not_match`` examples next to each rule).

Each entry of ``facts.toml`` is a command (``sort``), a subcommand (``git log``) or a ``python -m``
module (``pytest``):

- ``options``: the known-safe options, one token each, spelled exactly as the tool documents
  them: ``-l`` / ``--all`` take no value; ``-n=`` / ``--lines=`` take one (attached or the next
  word); ``--color=?`` only when attached; ``--arg=2`` two words; ``-o=W`` a path the tool WRITES;
  ``--cov-report=W:`` a value whose part after ``:`` is a path written; ``-c=C`` a configuration
  file (it must be inside the workspace: configurations load plugins); ``-NUM`` allows ``-5``;
  ``SINGLE``: ``-name``/``--name`` long options, no clusters; ``STOP``: the first operand ends the
  options (``node FILE args``); ``ANY``: every option is harmless and none opens a file.
  ``--help``/``--version`` are added unless ``SINGLE``. ``uses`` adds shared groups (``[groups]``).
- ``danger``: options the tool has that are NOT known-safe, each with why (it runs a program,
  reads names from a file, points the tool elsewhere): parsed with their values, and an ask.
- ``abbrev``: the tool's parser accepts unambiguous prefixes of long options (GNU getopt_long,
  git, argparse), so ``--outp=F`` is spelled out to ``--output=F`` before the judges see it.
- ``subcommands``: ``TOOL SUB`` entries (``git log``) apply after the tool's own options.
- ``same_as``: the entry reads another's options (``egrep`` reads ``grep``'s).
- ``wrapper``: a command that runs another (``timeout``, ``sudo``, ``xargs``): keel.policy.shell.unwrap
  skips its options, read from here, to find the command it runs.
- ``match`` / ``not_match``: command lines whose options the entry accepts / does not accept;
  ``writes``: ``[command line, path]`` pairs — the path must be found as written. A wrong example
  stops the table from loading (``FactsError``), so the data cannot drift from what it says.

An option missing from an entry asks: an entry only grows by someone reading the tool's manual.
"""

from __future__ import annotations

import functools
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.policy.shell.parse import Word

FACTS_FILE = Path(__file__).with_name("facts.toml")
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
# Builtins and commands that open no files and run nothing through their options; their judges
# (system.py) read the flags that matter. `[`/`test`/`expr` take expressions, not options.
FREE = frozenset({"echo", "printf", "test", "[", "[[", "]]", ":", "true", "false", "exit", "return", "break",
                  "continue", "shift", "wait", "jobs", "expr", "set", "unset", "cd", "pushd", "popd", "dirs",
                  "export", "declare", "typeset", "local", "readonly", "read", "trap", "shopt", "hash", "alias",
                  "unalias", "type", "eval", "source", ".", "command", "builtin", "exec", "enable", "history",
                  "kill", "pkill", "killall", "env", "xargs", "ulimit", *SHELLS})
PYTHON = re.compile(r"python(\d+(\.\d+)?)?|pypy3?")


class FactsError(ValueError):
    """facts.toml cannot be loaded: a malformed entry or an example the entry does not agree with."""


@dataclass(frozen=True)
class Spec:
    """One entry's options, parsed from its spec text."""

    flags: frozenset[str] = frozenset()       # take no value
    valued: frozenset[str] = frozenset()      # take a value, attached (--x=v, -xv) or as the next word
    optional: frozenset[str] = frozenset()    # take a value only when attached (--color[=WHEN], -i[SUFFIX])
    writes: frozenset[str] = frozenset()      # valued options whose value is a path the tool writes
    pairs: frozenset[str] = frozenset()       # take two words (jq --arg NAME VALUE)
    colon: frozenset[str] = frozenset()       # a value KIND:PATH writes PATH (--cov-report=html:DIR)
    configs: frozenset[str] = frozenset()     # configuration (can load plugins): must be inside the workspace
    numeric: bool = False                     # -NUM is a count (head -5, git log -3)
    single_dash: bool = False                 # -name and --name are one long option, no clusters (go, find)
    stop_at_operand: bool = False             # the first operand ends the options (node FILE args ...)
    any_word: bool = False                    # every option is harmless: a word built at run time may be anything
    danger: Mapping[str, str] = field(default_factory=dict)   # option -> why it is not known-safe
    danger_valued: frozenset[str] = frozenset()
    abbrev: bool = False                      # the tool accepts unambiguous prefixes of long options

    @property
    def known(self) -> frozenset[str]:
        return self.flags | self.valued | self.optional | self.pairs

    @property
    def long_options(self) -> frozenset[str]:
        return frozenset(o for o in self.known | frozenset(self.danger) if o.startswith("--"))


EMPTY = Spec()


def spec_from_text(text: str, danger: Mapping[str, str] | None = None, abbrev: bool = False) -> Spec:
    sets: dict[str, set[str]] = {k: set() for k in ("flags", "valued", "optional", "writes", "pairs", "colon",
                                                    "configs")}
    marks = {"numeric": False, "single_dash": False, "stop_at_operand": False, "any_word": False}
    for token in text.split():
        word = {"-NUM": "numeric", "SINGLE": "single_dash", "STOP": "stop_at_operand", "ANY": "any_word"}.get(token)
        if word:
            marks[word] = True
            continue
        name, kind = _token(token)
        sets[kind].add(name)
        if kind in ("writes", "colon", "configs"):
            sets["valued"].add(name)
    if not marks["single_dash"]:
        sets["flags"] |= {"--help", "--version"}
    reasons: dict[str, str] = {}
    danger_valued: set[str] = set()
    for token, why in (danger or {}).items():
        for one in token.split():
            name, kind = _token(one)
            reasons[name] = why
            if kind != "flags":
                danger_valued.add(name)
    return Spec(**{k: frozenset(v) for k, v in sets.items()}, **marks, danger=reasons,  # type: ignore[arg-type]
                danger_valued=frozenset(danger_valued), abbrev=abbrev)


def _token(token: str) -> tuple[str, str]:
    for suffix, kind in (("=?", "optional"), ("=C", "configs"), ("=W:", "colon"), ("=W", "writes"), ("=2", "pairs"),
                         ("=", "valued")):
        if token.endswith(suffix):
            return token[:-len(suffix)], kind
    return token, "flags"


# -- the one option parser -------------------------------------------------------------------------

@dataclass
class Parsed:
    options: list[tuple[str, Word | None]] = field(default_factory=list)
    operands: list[Word] = field(default_factory=list)
    problem: str | None = None                            # why the options are not all known-safe
    writes: list[tuple[str, Word]] = field(default_factory=list)   # (option, path written); ("config OPT", path)

    def note(self, problem: str) -> None:
        self.problem = self.problem or problem


def parse(spec: Spec, args: list[Word]) -> Parsed:
    """Split ``args`` by ``spec``: options with their values, operands, writes, and the first
    option that is not known-safe (unknown, an abbreviation, dangerous, built at run time)."""
    out = Parsed()
    i = 0
    while i < len(args):
        word = args[i]
        text = word.value
        if text == "--":
            out.operands += args[i + 1:]
            break
        if not word.literal and _may_be_option(word) and not spec.any_word:
            out.note(f"{word.raw!r} may expand to an option, only known when it runs")
            out.operands.append(word)
        elif text.startswith("-") and text != "-" and (text.startswith("--") or spec.single_dash) and len(text) > 2:
            i += _long(spec, args, i, out)
        elif text.startswith("-") and text != "-" and spec.numeric and re.fullmatch(r"-\d+", text):
            out.options.append((text, None))
        elif text.startswith("-") and text != "-":
            i += _cluster(spec, text, args[i + 1] if i + 1 < len(args) else None, word, out)
        elif spec.stop_at_operand:
            out.operands += args[i:]
            break
        else:
            out.operands.append(word)
        i += 1
    return out


def _long(spec: Spec, args: list[Word], i: int, out: Parsed) -> int:
    """One long option at ``args[i]``; returns the extra words it took."""
    word = args[i]
    name, eq, value = word.value.partition("=")
    if spec.single_dash and name.startswith("--"):
        name = name[1:]
    if eq:
        val = Word(value, value, word.params, word.subs)
        out.options.append((name, val))
        if name in spec.danger:
            out.note(f"{name}: {spec.danger[name]}")
        elif name not in spec.valued | spec.optional and not (spec.single_dash and name in spec.flags):
            out.note(f"{name}={value} is not on the list of known-safe options")
        _record_write(spec, name, val, out)
        return 0
    take = 2 if name in spec.pairs else 1 if name in spec.valued | spec.danger_valued else 0
    value_word = args[i + 1] if take and i + 1 < len(args) else None
    out.options.append((name, value_word))
    if take and value_word is None:
        out.note(f"{name} needs a value")
    if name in spec.danger:
        out.note(f"{name}: {spec.danger[name]}")
    elif name not in spec.known:
        out.note(f"option {name!r} is not on the list of known-safe options (spelled exactly)")
    if value_word is not None:
        _record_write(spec, name, value_word, out)
    return take


def _cluster(spec: Spec, text: str, following: Word | None, word: Word, out: Parsed) -> int:
    """``-la``, ``-n5``, ``-o FILE``: short options in a row; returns the extra words used."""
    for j, ch in enumerate(text[1:], start=1):
        opt = "-" + ch
        rest = text[j + 1:]
        if opt in spec.flags:
            out.options.append((opt, None))
            continue
        if opt in spec.optional:
            out.options.append((opt, Word(rest, rest) if rest else None))
            return 0
        if opt in spec.valued or opt in spec.danger_valued:
            value = Word(rest, rest, word.params, word.subs) if rest else following
            out.options.append((opt, value))
            if opt in spec.danger:
                out.note(f"{opt}: {spec.danger[opt]}")
            if value is not None:
                _record_write(spec, opt, value, out)
            return 0 if rest else 1
        if spec.numeric and ch.isdigit() and text[j:].isdigit():
            return 0
        out.options.append((opt, None))
        out.note(f"{opt}: {spec.danger[opt]}" if opt in spec.danger
                 else f"option {opt!r} (in {text!r}) is not on the list of known-safe options")
    return 0


def _record_write(spec: Spec, name: str, value: Word, out: Parsed) -> None:
    if name in spec.configs:
        out.writes.append(("config " + name, value))
    if name in spec.writes:
        out.writes.append((name, value))
    elif name in spec.colon and ":" in value.value:
        path = value.value.split(":", 1)[1]
        out.writes.append((name, Word(path, path, value.params, value.subs)))


def _may_be_option(word: Word) -> bool:
    """A word whose first characters come from an expansion could start with a dash."""
    if word.raw.lstrip("\"'").startswith(tuple("-+")) or re.match(r"\$\{?(HOME|PWD|OLDPWD)\b", word.value):
        return False                  # an absolute path never starts with a dash
    return word.value.startswith(("$", "`")) or word.raw.lstrip("\"").startswith(("$", "`"))


def has(parsed: Parsed, *names: str) -> bool:
    return any(opt in names for opt, _ in parsed.options)


def values_of(parsed: Parsed, *names: str) -> list[Word]:
    return [value for opt, value in parsed.options if opt in names and value is not None]


# -- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    specs: Mapping[str, Spec]
    subcommand_tools: frozenset[str]

    def spec(self, key: str) -> Spec | None:
        return self.specs.get(key)


@functools.cache
def table() -> Table:
    """facts.toml, loaded once, its examples checked (FactsError names every one that fails)."""
    return load(FACTS_FILE.read_text(encoding="utf-8"))


def load(text: str) -> Table:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactsError(f"facts.toml: {exc}") from None
    groups = raw.pop("groups", {})
    specs: dict[str, Spec] = {}
    for key, entry in raw.items():
        specs[key] = _entry_spec(key, entry, raw, groups)
    built = Table(specs, frozenset(k for k, e in raw.items() if e.get("subcommands")))
    problems = [p for key, entry in raw.items() for p in _check(built, key, entry)]
    if problems:
        raise FactsError("facts.toml examples disagree with their entries:\n" + "\n".join(problems))
    return built


_ENTRY_KEYS = frozenset({"options", "uses", "danger", "abbrev", "subcommands", "same_as", "match", "not_match",
                         "writes", "wrapper"})


def _entry_spec(key: str, entry: Mapping[str, Any], raw: Mapping[str, Any], groups: Mapping[str, str]) -> Spec:
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise FactsError(f"facts.toml [{key}]: unknown key(s) {', '.join(sorted(unknown))}")
    source = entry
    if "same_as" in entry:
        if entry["same_as"] not in raw or "same_as" in raw[entry["same_as"]]:
            raise FactsError(f"facts.toml [{key}]: same_as names no entry with options of its own")
        source = raw[entry["same_as"]]
    missing = [g for g in source.get("uses", ()) if g not in groups]
    if missing:
        raise FactsError(f"facts.toml [{key}]: no group {missing[0]!r}")
    text = " ".join([*(groups[g] for g in source.get("uses", ())), source.get("options", "")])
    return spec_from_text(text, {**source.get("danger", {}), **entry.get("danger", {})},
                          bool(entry.get("abbrev", source.get("abbrev", False))))


def _check(built: Table, key: str, entry: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for line in entry.get("match", ()):
        found = _parsed(built, line)
        if found is None or found[0] != key or found[1].problem is not None:
            problems.append(f"[{key}] match {line!r}: " + (found[1].problem or f"read as [{found[0]}]"
                                                           if found else "no entry"))
    for line in entry.get("not_match", ()):
        found = _parsed(built, line)
        if found is None or found[0] != key or found[1].problem is None:
            problems.append(f"[{key}] not_match {line!r}: accepted" if found and found[0] == key
                            else f"[{key}] not_match {line!r}: read as {found[0] if found else 'no entry'}")
    for line, path in entry.get("writes", ()):
        found = _parsed(built, line)
        if found is None or path not in [w.value for _, w in found[1].writes]:
            problems.append(f"[{key}] writes {line!r}: {path!r} not found as written")
    return problems


def _parsed(built: Table, line: str) -> tuple[str, Parsed] | None:
    words = [Word(w, shlex.quote(w)) for w in shlex.split(line)]
    found = resolve(words, built)
    return (found[0], parse(found[1], found[2])) if found is not None else None


# -- which entry applies ---------------------------------------------------------------------------

def resolve(argv: list[Word], built: Table | None = None) -> tuple[str, Spec, list[Word]] | None:
    """The entry that applies to ``argv`` and the words it covers; None for FREE commands and for
    arguments that belong to a program, not to the command (``python script.py ARGS``)."""
    facts = built or table()
    name = argv[0].value.rsplit("/", 1)[-1] if argv else ""
    args = argv[1:]
    if name in FREE:
        return None
    if PYTHON.fullmatch(name):
        return _python(args, facts)
    if name in facts.subcommand_tools:
        if name == "git":
            at = _git_subcommand(args)
            if at is None:
                return "git", facts.spec("git") or EMPTY, args
            key = f"git {args[at].value}"
            return key, facts.spec(key) or EMPTY, args[at + 1:]
        key = name
        at = next((i for i, w in enumerate(args) if not w.value.startswith(("-", "+"))), None)
        if at is not None and facts.spec(f"{name} {args[at].value}") is not None:
            key = f"{name} {args[at].value}"
            args = args[:at] + args[at + 1:]          # the subcommand word itself
        if name == "go" and "-args" in [w.value for w in args]:
            args = args[:[w.value for w in args].index("-args")]
        return key, facts.spec(key) or EMPTY, args
    return name, facts.spec(name) or EMPTY, args


def _git_subcommand(args: list[Word]) -> int | None:
    i = 0
    while i < len(args) and args[i].value.startswith("-"):
        i += 2 if args[i].value in ("-c", "-C", "--git-dir", "--work-tree", "--namespace") else 1
    return i if i < len(args) else None


def _python(args: list[Word], facts: Table) -> tuple[str, Spec, list[Word]] | None:
    """``python [opts] -m MODULE args``: the module's entry covers its args; ``-c``/a script: the
    interpreter's own options only (what follows belongs to the program)."""
    own = facts.spec("python") or EMPTY
    for i, word in enumerate(args):
        text = word.value
        if "pycache_prefix" in text and (text.startswith("-X") or (i and args[i - 1].value == "-X")):
            return "python", EMPTY, [Word("-X pycache_prefix", text)]   # writes .pyc files elsewhere
        m = re.fullmatch(r"-[A-Za-z]*m(.*)", text)
        if m:
            module = m.group(1) or (args[i + 1].value if i + 1 < len(args) else "")
            rest = args[i + 1:] if m.group(1) else args[i + 2:]
            if parse(own, args[:i]).problem:
                return "python", own, args[:i]
            if facts.spec(module) is None:
                return None            # python -m PKG: the package's own arguments
            return resolve([Word(module, module)] + rest, facts)
        if re.fullmatch(r"-[A-Za-z]*c.*", text) or text == "-" or not text.startswith("-"):
            return "python", own, args[:i]
    return "python", own, args


def options(name: str, args: list[Word]) -> Parsed:
    """``args`` of the command ``name`` read by its entry (no entry: every option unknown, no values)."""
    return parse(table().spec(name) or EMPTY, args)
