"""Rules every command's arguments pass, whatever its own judge says: allow only on positive knowledge.

- **Abbreviated long options** (``sort --o=F`` is ``--output=F``: getopt_long and git accept any
  unambiguous prefix; ``abbrev`` in facts.toml) are spelled out before a judge sees them, so every
  judge checks the real option.
- **Options that write**: ``--output=F``, ``--log-file F``, ``--index-file=F`` ... on any command
  are judged as writes of F; an unknown ``--opt=PATH`` is judged as a possible write of PATH.
- **Paths built at run time** (variables, ``${…}``, ``$'…'``, ``$(…)``, ``~+``, loop and ``read``
  variables, a directory only known at run time) ask, for readers as for writers.
- **Secrets by pattern**: globs that can match one, recursive readers whose tree holds one, git object
  paths (``HEAD:.env``); ``/proc/*/environ`` never.
- **Arithmetic in array subscripts** (``test -v 'a[$(cmd)]'``): bash runs the command inside.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from keel.policy.shell.commands import Finding, Invocation, ask, deny, judge_write
from keel.policy.shell.facts import EMPTY, has, options, parse, resolve, table, values_of
from keel.policy.shell.parse import Cwds, Word
from keel.policy.shell.secrets import git_object_path, glob_matches_secret, is_secret, secret_under

if TYPE_CHECKING:
    from keel.policy.shell.commands import JudgeEnv
    from keel.policy.shell.paths import PathJudge

# Long options whose value a tool writes to (the value may follow as the next word).
WRITE_LONG = frozenset({"--output", "--output-file", "--outfile", "--out-file", "--log-file", "--logfile",
                        "--index-file", "--report-log", "--result-log", "--debug-file",
                        "--html-report", "--txt-report", "--xml-report", "--cobertura-xml-report",
                        "--linecount-report", "--lineprecision-report", "--any-exprs-report", "--xslt-html-report",
                        "--basetemp", "--trace-file", "--output-dir", "--output-directory", "--junit-file",
                        "--cache-dir", "--outDir", "--outdir", "--outFile", "--out-dir", "--declarationDir",
                        "--tsBuildInfoFile", "--outputFile", "--data-file", "--json-report-file"})
# `--opt=PATH` forms known to read PATH (or name a directory to work in) rather than write it.
READ_LONG = frozenset({"--file", "--exclude-from", "--files-from", "--files0-from", "--config-file", "--config",
                       "--rcfile", "--ignore-file", "--reference", "--from-file", "--input", "--rawfile",
                       "--slurpfile", "--include", "--exclude", "--exclude-dir", "--include-dir", "--glob",
                       "--iglob", "--directory", "--rootdir", "--manifest-path", "--confcutdir", "--cwd",
                       "--prefix", "--settings", "--project", "--cov", "--cov-config", "--ignore", "--deselect",
                       "--git-dir", "--work-tree", "--source", "--pathspec-from-file", "--patterns-from",
                       "--anchored", "--tsconfig", "--resolve-plugins-relative-to", "--ignore-path",
                       "--stdin-filename", "--format", "--pretty", "--date", "--color", "--type-add",
                       "--exec-path", "--namespace", "--super-prefix", "--list-cmds", "--reporters", "--reporter",
                       "--test-reporter", "--environment", "--settings-path", "--sp"})
# Commands whose arguments are never opened as files (their paths are judged elsewhere or not at all).
NO_PATH = frozenset({"echo", "printf", "true", "false", ":", "test", "[", "[[", "]]", "exit", "return", "sleep",
                     "seq", "expr", "set", "unset", "export", "declare", "typeset", "local", "readonly", "shift",
                     "break", "continue", "wait", "jobs", "cd", "pushd", "popd", "dirs", "type", "which",
                     "command", "basename", "dirname", "id", "whoami", "uname", "date", "kill", "pwd", "ls", "du",
                     "df", "stat", "realpath", "readlink", "tree", "nproc", "hash", "alias", "unalias", "umask",
                     "trap", "eval", "exec", "source", "."})
RECURSIVE_READERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep"})
_SUBSCRIPT_CODE = re.compile(r"\[[^\]]*(\$\(|`)")
_PROC_ENVIRON = re.compile(r"/proc/[^/\s]*/+(task/[^/\s]*/+)?(environ|mem)\b")
# A glob or a name built at run time under /proc/<pid>/ may reach environ or mem.
_PROC_PID_BUILT = re.compile(r"/proc/+([^/\s]*[*?\[$`{][^/\s]*/*|[^/\s]+/+([^/\s]*[*?\[$`{]|task/))")


def spell_out(argv: list[Word]) -> tuple[list[Word], list[Finding]]:
    """Replace abbreviated long options by their full spelling for tools whose parser accepts
    prefixes (``abbrev`` in facts.toml: ``sort --o=F`` is ``--output=F``), so every judge checks
    the real option; a prefix of several asks. An exact option is never taken for a prefix."""
    found = resolve(argv)
    if found is None:
        return argv, []
    key, spec, _ = found
    base = table().spec(key.split(" ")[0]) if " " in key else None
    if not (spec.abbrev or (base is not None and base.abbrev)):
        return argv, []
    known = spec.long_options | (base.long_options if base is not None else frozenset())
    out: list[Word] = [argv[0]]
    issues: list[Finding] = []
    for word in argv[1:]:
        name, eq, value = word.value.partition("=")
        if word.value == "--":
            out.extend(argv[len(out):])
            break
        matches = sorted(full for full in known if full.startswith(name)) if name.startswith("--") and \
            len(name) >= 3 and name not in known else []
        if len(matches) == 1:
            text = matches[0] + eq + value
            out.append(Word(text, word.raw, word.params, word.subs, word.glob, word.brace))
        else:
            if matches:
                issues.append(ask(f"{name!r} abbreviates one of {', '.join(matches[:6])}", lift=None))
            out.append(word)
    return out, issues


def option_writes(env: JudgeEnv, inv: Invocation) -> list[Finding]:
    """``--output=F`` / ``--log-file F`` on a command facts.toml does not describe (a described one's
    writes are judged from its entry), and past a described command's options (``npm test --
    --outputFile=F``); an unknown ``--opt=PATH`` there counts as a possible write."""
    found = resolve(inv.argv)
    own: set[int] = set()                  # the words a described command's entry read as its own options
    if found is not None and found[1] is not EMPTY:
        parsed = parse(found[1], found[2])
        operands = {id(w) for w in parsed.operands}
        own = {id(w) for w in found[2] if id(w) not in operands}
    args = [w for w in inv.args if id(w) not in own]
    out: list[Finding] = []
    for i, word in enumerate(args):
        name, eq, value = word.value.partition("=")
        if not name.startswith("--"):
            continue
        if name in WRITE_LONG:
            target = Word(value, value, word.params, word.subs) if eq else (args[i + 1] if i + 1 < len(args)
                                                                              else None)
            if target is not None and not target.value.startswith("-"):
                out += judge_write(env, target, inv.cwds, verb=f"{name} writes")
        elif eq and name not in READ_LONG and _pathlike(value):
            for part in {value, value.split(":", 1)[-1]}:      # --cov-report=html:DIR
                out += judge_write(env, Word(part, part, word.params, word.subs), inv.cwds,
                                   verb=f"{name}= may write")
    return out


def _pathlike(value: str) -> bool:
    return "/" in value or value.startswith(("~", ".")) or bool(re.search(r"\.\w{1,5}$", value))


def unknown_paths(env: JudgeEnv, inv: Invocation) -> list[Finding]:
    """A file argument only known at run time: what it opens cannot be checked."""
    for word in inv.args:
        name = word.value.split("=", 1)[0]
        if name in _NAMES_FROM_FILE or (inv.name == "tar" and name in ("-T", "-X")) \
                or (inv.name == "xargs" and name == "-a") or (inv.name == "git" and name.startswith("--batch")):
            return [ask(f"{inv.name} {name} reads file or object names from input, only known when it runs",
                        lift=None)]
    if inv.name in NO_PATH:
        return []
    not_paths = _NOT_PATH_VALUES.get(inv.name, frozenset())
    for i, word in enumerate(inv.args):
        if i and inv.args[i - 1].value in not_paths or word.value.split("=", 1)[0] in not_paths:
            continue                              # git commit -m "$(cat <<EOF …)": a message, not a path
        if word.value.startswith("-") and "=" not in word.value and word.literal:
            continue
        if word.subs and all(sub.kind == "process" for sub in word.subs) and not word.params:
            continue                              # <(cmd): a pipe whose command is judged
        if word.value.startswith(("~+", "~-")) or any(p.where == "unknown" for p in env.paths.places(word, inv.cwds)):
            return [ask(f"{inv.name} gets {word.raw!r}, a path only known when it runs", lift=None)]
    if inv.extra_args:
        return [ask(f"{inv.name} gets file names from its input (xargs), only known when it runs", lift=None)]
    return []


# Options whose value is text, not a file: a value built at run time there opens nothing.
_NOT_PATH_VALUES = {"git": frozenset({"-m", "--message", "--author", "--date", "--format", "--pretty", "--grep",
                                      "-S", "-G", "--since", "--until", "--after", "--before", "--committer"}),
                    "grep": frozenset({"-e", "--regexp"}), "rg": frozenset({"-e", "--regexp"}),
                    "pytest": frozenset({"-k", "-m"})}
_NAMES_FROM_FILE = frozenset({"--files0-from", "--files-from", "--arg-file", "--exclude-from", "--pathspec-from-file"})


def secret_reads(inv: Invocation, words: list[Word], cwds: Cwds, contents: bool = True) -> list[Finding]:
    """Secrets named through globs, git object paths and /proc/*/environ; ``contents``: the command
    reads what the files hold (``chmod +x scripts/*`` does not)."""
    out: list[Finding] = []
    for word in words:
        value = word.value
        if _PROC_ENVIRON.search(value) or ("/proc/" in value and "environ" in value):
            out.append(deny("reads a process's environment or memory (keel's own holds its API key)", lift=None,
                            secret=True))
        elif _PROC_PID_BUILT.search(value) and (word.glob or not word.literal):
            out.append(ask(f"{value!r} under /proc is only known when it runs (a process's environment?)",
                           lift=None, secret=True))
        if word.glob and contents:
            for cwd in cwds or {None}:
                if glob_matches_secret(value, cwd):
                    out.append(ask(f"the glob {value!r} can match a secret-looking file", lift=None, secret=True))
                    break
        if inv.name == "git" and word.literal and (path := git_object_path(value)) is not None and is_secret(path):
            out.append(ask(f"reads {path} from git's object store, a secret-looking file", lift=None, secret=True))
    return out


def recursive_secrets(env: JudgeEnv, inv: Invocation) -> list[Finding]:
    """``grep -r . .``, ``rg -uu``: a recursive reader whose tree holds a secret-looking file."""
    name = inv.name
    values = [w.value for w in inv.args]
    if name == "git" and "grep" in values:             # git grep: every tracked file, hidden ones too
        rest = values[values.index("grep") + 1:]
        paths = rest[rest.index("--") + 1:] if "--" in rest else []
        return _scan(env, inv, "git grep", [Word(p, p) for p in paths] or [Word(".", ".")], True, [])
    if name in _ARCHIVERS:
        return _archived_secrets(env, inv)
    if name not in RECURSIVE_READERS:
        return []
    parsed = options(name, inv.args)
    operands = parsed.operands
    recursive = name in ("rg", "ag", "ack") or has(parsed, "-r", "-R", "--recursive", "--dereference-recursive") \
        or any(w.value == "recurse" for w in values_of(parsed, "-d", "--directories"))
    if not recursive:
        return []
    hidden = name not in ("rg", "ag") or any(v in ("--hidden", "-.", "--no-ignore", "-uu", "-uuu", "-u")
                                              or v.startswith("--no-ignore") for v in values)
    excluded = [v.split("=", 1)[1] for v in values if v.startswith(("--exclude=", "--exclude-dir="))]
    excluded += [values[i + 1].lstrip("!") for i, v in enumerate(values[:-1])
                 if v in ("-g", "--glob", "--iglob") and values[i + 1].startswith("!")]
    excluded += [v.split("=", 1)[1].lstrip("!") for v in values if v.startswith(("--glob=!", "--iglob=!"))]
    # Only these names are read (grep --include, rg -g GLOB): a glob with a slash or brace is not
    # modelled, so it includes nothing here and the scan stays whole.
    included = [w.value for w in values_of(parsed, "--include", "-g", "--glob", "--iglob")
                if w.literal and not w.value.startswith("!") and not set(w.value) & set("/{}")]
    if not has(parsed, "-e", "--regexp", "-f", "--file"):
        operands = operands[1:]                      # the first operand is the pattern
    return _scan(env, inv, name, operands or [Word(".", ".")], hidden, excluded, included)


_ARCHIVERS = frozenset({"tar", "bsdtar", "zip", "7z", "rsync", "scp", "cpio"})


def _archived_secrets(env: JudgeEnv, inv: Invocation) -> list[Finding]:
    """``tar czf - .``, ``zip -r x.zip .``, ``rsync -a . host:``: they read whole trees too."""
    values = inv.values
    first = values[0] if values else ""
    if inv.name in ("tar", "bsdtar"):
        reading = any(v in ("-c", "--create", "-r", "--append", "-u", "--update") for v in values) or bool(
            re.fullmatch(r"-?[a-zA-Z]*[cru][a-zA-Z]*", first) and not first.startswith("--"))
        parsed = options("tar", inv.args[1:] if not first.startswith("-") else inv.args)
        operands = parsed.operands
        if not first.startswith("-") and "f" in first and operands:
            operands = operands[1:]                        # tar czf OUT.tgz SRC...: OUT is written
    elif inv.name in ("zip", "7z"):
        parsed = options(inv.name, inv.args)
        reading = has(parsed, "-r", "-R", "--recurse-paths") or inv.name == "7z"
        operands = parsed.operands[1:]                     # the archive itself
    else:
        parsed = options(inv.name, inv.args)
        reading = has(parsed, "-r", "-a", "--recursive", "--archive")
        operands = [w for w in parsed.operands[:-1] if ":" not in w.value]
    if not reading:
        return []
    excluded = [w.value for w in values_of(parsed, "--exclude", "-x")] + \
        [v.split("=", 1)[1] for v in values if v.startswith("--exclude=")]
    return _scan(env, inv, inv.name, operands, True, excluded)


def _scan(env: JudgeEnv, inv: Invocation, name: str, targets: list[Word], hidden: bool,
          excluded: list[str], included: list[str] | None = None) -> list[Finding]:
    # the files the OS tier itself hides from the command (bubblewrap mounts an empty file over them)
    unseen = frozenset(env.tier_hidden()) if env.tier_hidden is not None else frozenset()
    for word in targets:
        for place in env.paths.places(word, inv.cwds):
            if place.real is None or place.where not in ("inside", "root"):
                continue
            found = secret_under(place.real, hidden=hidden, excluded=excluded, included=included, unseen=unseen)
            if found is not None:
                return [ask(f"{name} reads recursively through {found.name}, a secret-looking file (exclude it, "
                            "e.g. --exclude=.env, or use the grep tool, which skips secrets)", lift=None, secret=True)]
    return []


def subscript_code(words: list[Word]) -> list[Finding]:
    """``test -v 'a[$(cmd)]'``, ``printf -v``, ``read``, ``declare``, ``$((x))``: bash evaluates the
    subscript as arithmetic and runs the command inside it. ``${!v}`` reads a variable named at run
    time: what it reads cannot be followed."""
    for word in words:
        if any(p.startswith("{!") for p in word.params):
            return [ask(f"{word.raw!r}: an indirect expansion reads a variable named only at run time", lift=None)]
        if _SUBSCRIPT_CODE.search(word.value) and not word.subs:
            return [ask(f"{word.raw!r}: bash runs the command in an array subscript", lift=None)]
    return []


def pythonpath_outside(paths: PathJudge, word: Word, cwds: Cwds) -> str | None:
    """``PYTHONPATH=src:$PYTHONPATH``: the first entry outside the workspace (None: all inside)."""
    value = word.value.partition("=")[2]
    for entry in value.split(":"):
        if entry in ("$PYTHONPATH", "${PYTHONPATH}", ""):
            continue                     # the inherited value
        params = tuple(p for p in word.params if "$" + p in entry or "${" + p in entry)
        places = paths.places(Word(entry, entry, params, word.subs if "$" in entry else ()), cwds)
        if any(p.where not in ("inside", "root") for p in places):
            return entry
    return None
