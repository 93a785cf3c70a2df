"""Peel wrapper commands (env, sudo, xargs, timeout, bash -c, ...) off a command line.

``unwrap`` returns the command that really runs, the wrappers around it, environment
assignments made through ``env``, and shell code the wrappers hand to a shell (``bash -c``,
``su -c``), which the policy parses again. A wrapper option that is not understood stops the
peeling with an "ask" issue: guessing where the inner command starts is how allowlists fall.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from keel.policy.shell.facts import EMPTY, SHELLS, table
from keel.policy.shell.parse import Word

# Environment variables, by what setting them can do to the commands keel allows.
_DENY_ENV = frozenset({"LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV",
                       "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "GIT_CONFIG_PARAMETERS",
                       "GIT_CONFIG_COUNT"})
_COMMAND_ENV = frozenset({"VISUAL", "GIT_SSH", "GIT_EXTERNAL_DIFF", "LESSOPEN", "LESSCLOSE",
                          "BROWSER", "FCEDIT", "TERMINAL"})
_SAFE_ENV = frozenset({"LANG", "LANGUAGE", "TZ", "TERM", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR",
                       "CLICOLOR", "CLICOLOR_FORCE", "CI", "PYTHONPATH", "PYTHONUNBUFFERED",
                       "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONIOENCODING",
                       "PYTHONUTF8", "PYTHONFAULTHANDLER", "PYTHONDEVMODE",
                       "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PY_COLORS", "MYPY_FORCE_COLOR", "RUST_BACKTRACE",
                       "RUST_LOG", "NODE_ENV", "CARGO_TERM_COLOR", "GOOS", "GOARCH", "CGO_ENABLED",
                       "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
                       "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT",
                       "GIT_OPTIONAL_LOCKS", "TMPDIR", "DEBUG", "VERBOSE"})
_CODE_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_", "BASH", "LESS", "RIPGREP_", "PERL5", "RUBY", "MAKE",
                      "PYTHON", "NODE_OPTIONS", "JAVA_", "_JAVA_OPTIONS",
                      # the toolchains' own configuration by environment: which compiler, wrapper, proxy,
                      # plugin or runner they take, where they build (a name is "plain" only outside these)
                      "NPM_CONFIG_", "YARN_", "PNPM_", "PIP_", "UV_", "POETRY_", "PYTEST_", "TOX_", "NOX_",
                      "GO", "CGO_", "RUSTC", "RUSTDOC", "RUSTUP_", "CARGO_", "JEST_", "VITEST_", "MAVEN_",
                      "GRADLE_", "CMAKE_", "CONDA_", "VIRTUAL_ENV", "COMPOSER_", "BUNDLE_", "GEM_", "DOCKER_")
_CODE_ENV = frozenset({"PATH", "IFS", "HOME", "CDPATH", "SHELL", "CC", "CXX", "CPP", "LD", "AR", "AS", "FC", "NM",
                       "RANLIB", "STRIP", "OBJCOPY", "OBJDUMP"})
# Suffixes naming a program, a plugin or a place a tool writes to.
_CODE_ENV_SUFFIX = re.compile(r"(PATH|OPTIONS|OPTS|OPT|FLAGS|_WRAPPER|_PLUGINS?|_RUNNER|_ADDOPTS|_LOADER|_HOOKS?|"
                              r"_PRELOAD|_EXEC|_EXECUTABLE|_BIN|_PROGRAM|_COMPILER|_INTERPRETER|_DIR|_HOME|_ROOT|"
                              r"_PREFIX|_CACHE|_PROXY|_CONFIG|_RC|_INCLUDE|_LIB|_MODULES?)$")


def classify_env(name: str) -> str:
    """'deny' | 'command' (value is a program/shell command) | 'code' | 'safe' | 'plain'."""
    if name in _SAFE_ENV or name.startswith("LC_"):
        return "safe"
    if name in _DENY_ENV or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "BASH_FUNC_")):
        return "deny"
    if name in _COMMAND_ENV or re.search(r"(PAGER|EDITOR|_COMMAND|_CMD|ASKPASS)$", name):
        return "command"
    if name in _CODE_ENV or name.upper().startswith(_CODE_ENV_PREFIXES) or _CODE_ENV_SUFFIX.search(name.upper()):
        return "code"
    return "plain"


def env_name_risk(name: str) -> tuple[str, str] | None:
    """The risk of a command assigning ``name`` to a value the policy cannot see."""
    kind = classify_env(name)
    if kind == "deny":
        return "deny", f"sets {name}, which makes the shell, loader or git run code"
    if kind in ("command", "code"):
        return "ask", f"sets {name}, which changes which program runs"
    return None


@dataclass
class Unwrapped:
    argv: list[Word]                          # the innermost command; [] when a wrapper runs none
    layers: list[str] = field(default_factory=list)       # wrapper names, outermost first
    layer_words: list[list[Word]] = field(default_factory=list)
    env: list[Word] = field(default_factory=list)         # NAME=value given to `env`
    shell_code: list[tuple[str, Word]] = field(default_factory=list)  # (shell, code) to parse again
    writes: list[Word] = field(default_factory=list)      # files a wrapper writes (time -o)
    chdir: Word | None = None                 # env -C / sudo -D: the directory the command runs in
    extra_args: bool = False                  # xargs appends arguments read from stdin
    issues: list[tuple[str, str]] = field(default_factory=list)


def _literal_words(text: str, source: Word) -> list[Word] | None:
    """Split ``env -S`` style strings the way the wrapper will (shell-like quoting)."""
    if not source.literal:
        return None
    try:
        return [Word(tok, tok) for tok in shlex.split(text)]
    except ValueError:
        return None


def command_name(word: Word) -> str:
    return os.path.basename(word.value)


def _wrapper_options(name: str) -> tuple[frozenset[str], frozenset[str]]:
    """(options that take a value, options that take none) of the wrapper ``name`` (facts.toml)."""
    spec = table().spec(name) or EMPTY
    return spec.valued, spec.flags - {"--help", "--version"}


WRAPPERS = frozenset({"nohup", "timeout", "nice", "ionice", "time", "stdbuf", "setsid", "exec", "command", "builtin",
                      "sudo", "doas", "pkexec", "busybox", "xargs", "env"})
# Options that must never be skipped silently: they change what or where the command runs.
_REDIRECTING = {"sudo": {"-R", "--chroot", "-e", "--edit"}}
_CHDIR = {"env": {"-C", "--chdir"}, "sudo": {"-D", "--chdir"}}


def _split_option(word: str) -> tuple[str, str | None]:
    if word.startswith("--") and "=" in word:
        name, _, value = word.partition("=")
        return name, value
    return word, None


def _peel(name: str, argv: list[Word], out: Unwrapped) -> list[Word] | None:
    """Skip ``name``'s options; return the words of the command it runs, or None to stop."""
    with_value, flags = _wrapper_options(name)
    rest = argv[1:]
    i = 0
    while i < len(rest):
        word = rest[i].value
        if word == "--":
            i += 1
            break
        if name in ("env", "sudo", "doas") and re.match(r"[A-Za-z_]\w*\+?=", word):
            out.env.append(rest[i])
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            break
        opt, attached = _split_option(word)
        if name == "nice" and re.fullmatch(r"-\d+", opt):
            i += 1
            continue
        if name == "env" and (opt == "--split-string" or opt.startswith("-S")):
            code = attached if attached is not None else (opt[2:] if len(opt) > 2 else None)
            if code is None:
                if i + 1 >= len(rest):
                    break
                code, i = rest[i + 1].value, i + 1
            split = _literal_words(code, rest[i])
            if split is None:
                out.issues.append(("ask", "env -S with a string the policy cannot split"))
                return None
            return split + rest[i + 1:]
        if opt in _CHDIR.get(name, set()) or (name == "env" and re.fullmatch(r"-C.+", opt)):
            value = attached if attached is not None else (opt[2:] if len(opt) > 2 and opt.startswith("-C") else None)
            if value is not None:
                out.chdir = Word(value, value, rest[i].params, rest[i].subs)
                i += 1
            elif i + 1 < len(rest):
                out.chdir = rest[i + 1]
                i += 2
            else:
                return None
            continue
        if opt in _REDIRECTING.get(name, set()):
            out.issues.append(("ask", f"{name} {opt} changes what runs or where"))
            if name == "sudo" and opt in ("-e", "--edit"):
                out.writes.extend(rest[i + 1:])
                return []
            return None
        if attached is None and len(opt) > 2 and not opt.startswith("--") and opt[:2] in with_value:
            opt, attached = opt[:2], opt[2:]            # -n10, -sKILL: the value is attached
        if opt in with_value:
            if name == "time" and opt in ("-o", "--output"):
                target = Word(attached, attached) if attached is not None else (rest[i + 1] if i + 1 < len(rest) else None)
                if target is not None:
                    out.writes.append(target)
            i += 1 if attached is not None else 2
            continue
        if opt in flags or (name in ("sudo", "exec", "xargs", "stdbuf", "env") and _short_cluster_ok(opt, name)):
            if name == "command" and opt in ("-v", "-V"):
                return []
            i += 1
            continue
        if name == "command" and opt in ("-v", "-V", "-pv", "-vp"):
            return []
        if name in ("sudo", "doas") and opt in ("-l", "--list", "-v", "--validate", "-K", "--remove-timestamp", "-V", "--version"):
            return []
        out.issues.append(("ask", f"{name}: option {opt!r} is not understood, so the command it runs is unclear"))
        return None
    rest = rest[i:]
    if name == "timeout":
        rest = rest[1:]                       # the duration
    if name == "builtin" and rest and rest[0].value == "builtin":
        return None
    return rest


def _short_cluster_ok(opt: str, name: str) -> bool:
    """``-0r`` style clusters of flags that take no value."""
    if name == "xargs" and len(opt) > 2 and opt[1] in "adEILnPsile":
        return True                           # -n1, -I{}, -L1: value attached
    if not re.fullmatch(r"-[A-Za-z0-9]{2,}", opt):
        return False
    if name == "stdbuf":
        return opt[1] in "ioe"                # -oL: option with its value attached
    flags = _wrapper_options(name)[1]
    return all(f"-{c}" in flags for c in opt[1:])


def _shell(argv: list[Word], out: Unwrapped) -> list[Word] | None:
    """``bash -c CODE``: hand CODE back for parsing. A script or stdin stays as the command."""
    shell = command_name(argv[0])
    rest = argv[1:]
    has_c = False
    i = 0
    while i < len(rest):
        word = rest[i].value
        if word == "--":
            i += 1
            break
        if not word.startswith(("-", "+")) or word in ("-", "+"):
            break
        if word in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if word in ("--rcfile", "--init-file"):
            out.issues.append(("ask", f"{shell} {word} runs another file first"))
            i += 2
            continue
        if word.startswith("--"):
            if word not in ("--norc", "--noprofile", "--posix", "--login", "--restricted", "--verbose",
                            "--noediting", "--debugger"):
                out.issues.append(("ask", f"{shell}: option {word!r} is not understood"))
                return None
        elif "c" in word[1:]:
            has_c = True
        i += 1
    operands = rest[i:]
    if has_c:
        if not operands:
            out.issues.append(("ask", f"{shell} -c without a command"))
            return None
        out.shell_code.append((shell, operands[0]))
        return []
    return argv                              # a script file or stdin: judged as the shell itself


_WATCH_WITH_VALUE = frozenset({"-n", "--interval", "-q", "--equexit"})


def _watch(argv: list[Word], out: Unwrapped) -> list[Word] | None:
    """``watch CMD...`` runs ``sh -c "CMD..."`` over and over (``-x``: without a shell)."""
    rest = argv[1:]
    direct = False
    i = 0
    while i < len(rest) and rest[i].value.startswith("-"):
        opt, attached = _split_option(rest[i].value)
        if opt in ("-x", "--exec"):
            direct = True
        elif opt in _WATCH_WITH_VALUE and attached is None:
            i += 1
        elif not re.fullmatch(r"-[dtbegcpwn][0-9.]*|--[a-z-]+", opt):
            out.issues.append(("ask", f"watch: option {opt!r} is not understood"))
            return None
        i += 1
    out.issues.append(("ask", "watch repeats a command until it is stopped"))
    if direct or not rest[i:]:
        return rest[i:]
    words = rest[i:]
    text = " ".join(w.value for w in words)
    out.shell_code.append(("sh", Word(text, text, tuple(p for w in words for p in w.params),
                                      tuple(s for w in words for s in w.subs))))
    return []


def _su(argv: list[Word], out: Unwrapped) -> list[Word] | None:
    rest = argv[1:]
    for i, word in enumerate(rest):
        opt, attached = _split_option(word.value)
        if opt in ("-c", "--command", "--session-command"):
            code = Word(attached, attached) if attached is not None else (rest[i + 1] if i + 1 < len(rest) else None)
            if code is None:
                return None
            out.shell_code.append(("su", code))
            return []
    return []                                 # an interactive shell as another user


_TWO_WORD = {("uv", "run"): (frozenset({"--with", "--python", "-p", "--package", "--extra", "--group",
                                         "--env-file", "--index", "--with-requirements"}),
                              frozenset({"--frozen", "--locked", "--no-sync", "--isolated", "--no-project",
                                         "--all-extras", "--no-dev", "-q", "--quiet", "-v", "--offline"})),
             ("poetry", "run"): (frozenset(), frozenset({"-q", "--quiet", "-v", "-n", "--no-interaction"}))}


def _runner(argv: list[Word], out: Unwrapped) -> list[Word] | None:
    """``uv run CMD`` / ``poetry run CMD``: the project's environment around CMD."""
    with_value, flags = _TWO_WORD[(command_name(argv[0]), argv[1].value)]
    rest = argv[2:]
    i = 0
    while i < len(rest) and rest[i].value.startswith("-"):
        opt, attached = _split_option(rest[i].value)
        if opt == "--":
            i += 1
            break
        if opt in ("--with", "--with-requirements", "--index", "--python", "-p", "--env-file"):
            out.issues.append(("ask", f"{argv[0].value} run {opt} installs packages, fetches a Python or reads "
                                      "an env file the project's checks do not need"))
        if opt in with_value:
            i += 1 if attached is not None else 2
        elif opt in flags:
            i += 1
        else:
            out.issues.append(("ask", f"{argv[0].value} run: option {opt!r} is not understood"))
            return None
    return rest[i:]


MAX_LAYERS = 12


def unwrap(argv: list[Word]) -> Unwrapped:
    out = Unwrapped(argv=argv)
    current: list[Word] | None = argv
    for _ in range(MAX_LAYERS):
        if not current or not current[0].literal:
            break
        name = command_name(current[0])
        if name in WRAPPERS:
            inner = _peel(name, current, out)
        elif name in SHELLS:
            inner = _shell(current, out)
            if inner is current:
                break
        elif name == "su":
            inner = _su(current, out)
        elif name == "watch":
            inner = _watch(current, out)
        elif len(current) > 1 and (name, current[1].value) in _TWO_WORD:
            inner = _runner(current, out)
        else:
            break
        out.layers.append(name)
        out.layer_words.append(current)
        if name == "xargs":
            out.extra_args = True
            if inner is not None and not inner:
                inner = [Word("echo", "echo")]  # xargs with no command runs echo
        if inner is None:
            out.argv = []
            return out
        current = inner
    else:
        out.issues.append(("ask", "too many nested wrappers"))
        out.argv = []
        return out
    out.argv = current or []
    return out


# Wrappers that leave the command's exit status its own: what a check runs under them is still the check.
TRANSPARENT = frozenset({"env", "timeout", "nice", "time", "command"})
PROJECT_RUNNERS = frozenset({"uv", "poetry", "pipenv", "hatch", "pdm"})   # `uv run CMD`: CMD in the project's env


def _is_assignment(word: str) -> bool:
    return "=" in word and not word.startswith("=") and word.split("=", 1)[0].isidentifier()


def strip_wrappers(words: list[str], wrappers: frozenset[str] = TRANSPARENT) -> list[str]:
    """The words of the command a plain (already split) command line runs, past leading ``NAME=value``
    assignments and the ``wrappers`` named, with their options skipped as ``unwrap`` skips them
    (``timeout -s KILL 60 pytest`` and ``uv run --frozen pytest`` give ``pytest``). A wrapper whose
    options are not understood loses its name only (``pipenv run`` its two words)."""
    while words and (_is_assignment(words[0]) or words[0] in wrappers):
        if _is_assignment(words[0]):
            words = words[1:]
            continue
        argv = [Word(w, w) for w in words]
        name, scratch = words[0], Unwrapped(argv=argv)
        two_word = len(words) > 1 and (name, words[1]) in _TWO_WORD
        inner = _runner(argv, scratch) if two_word else _peel(name, argv, scratch) if name in WRAPPERS else None
        if inner is not None:
            words = [w.value for w in inner]
        elif name in PROJECT_RUNNERS and len(words) > 1 and words[1] == "run":
            words = words[2:]
        else:
            words = words[2:] if name == "timeout" else words[1:]
    return words
