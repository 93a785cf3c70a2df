"""Judges for package managers and builds: pip, npm/yarn/pnpm, cargo, go, make, system packages.

The project's checks and builds run (``npm test``, ``cargo test``, ``go vet``, ``make test``);
installing, publishing, fetching remote code (``go run host/pkg@latest``) or picking another
toolchain or configuration asks.
"""

from __future__ import annotations

import re

from keel.policy.shell.commands import (
    Finding,
    Invocation,
    Judge,
    JudgeEnv,
    allow,
    ask,
    judge_write,
    rewrites,
    runs_code,
    ws_write,
)
from keel.policy.shell.facts import EMPTY, options, table, values_of
from keel.policy.shell.parse import Word

RUN = "runs code (allowed unasked only when an OS tier confines it)"


def subcommand(args: list[Word], tool: str | None) -> tuple[str, list[Word]] | None:
    """The first word after the tool's own options (its entry in facts.toml says which take a
    value; ``tool`` None: it takes none); None when an option it does not list comes first."""
    spec = (table().spec(tool) if tool else None) or EMPTY
    i = 0
    while i < len(args) and args[i].value.startswith(("-", "+")):
        opt = args[i].value.split("=", 1)[0]
        if args[i].value.startswith("+") and tool == "cargo":
            i += 1
        elif opt in spec.valued and "=" not in args[i].value:
            i += 2
        elif opt in spec.known:
            i += 1
        else:
            return None
    if i >= len(args):
        return "", []
    return args[i].value, args[i + 1:]


def unclear(inv: Invocation) -> list[Finding]:
    return [ask(f"{inv.name}: options before the subcommand are not understood")]


# -- package managers and builds -----------------------------------------------------------------

def _pip(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    found = subcommand(inv.args, inv.name)
    if found is None:
        return unclear(inv)
    sub, _ = found
    if sub in ("", "list", "show", "freeze", "check", "help", "debug", "inspect"):
        return [allow(f"pip {sub} only reads")]
    network = sub in ("install", "download", "wheel", "index", "search")
    return [ask(f"pip {sub} changes installed packages", network=network, destructive=sub == "uninstall")]


_NPM_CHECK_SCRIPTS = frozenset({"test", "lint", "build", "typecheck", "type-check", "check", "tsc",
                                "format:check", "lint:check"})
_NPM_INSTALL = frozenset({"install", "i", "ci", "add", "uninstall", "un", "remove", "rm", "update", "up",
                          "upgrade", "exec", "x", "dlx", "publish", "audit", "outdated", "view", "info",
                          "link", "login", "create", "init"})


def _node_packages(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """npm / yarn / pnpm."""
    found = subcommand(inv.args, inv.name)
    if found is None:
        return unclear(inv)
    sub, rest = found
    name = inv.name
    first = rest[0].value if rest else ""
    if sub == "":
        if not inv.args and name == "yarn":
            return [ask("yarn installs packages", network=True)]
        return [allow(f"{name} prints information")]
    if sub in ("test", "t", "tst") or (sub in ("run", "run-script") and first in _NPM_CHECK_SCRIPTS | {""}):
        return [allow(f"{name} runs the project's checks")]
    if name in ("yarn", "pnpm") and sub in _NPM_CHECK_SCRIPTS:
        return [allow(f"{name} runs the project's checks")]
    if sub in ("ls", "list", "why", "help", "version") or (sub == "config" and first in ("get", "list", "ls")):
        return [allow(f"{name} {sub} only reads")]
    if sub in _NPM_INSTALL:
        return [ask(f"{name} {sub} installs or publishes packages", network=True,
                    destructive=sub in ("uninstall", "un", "remove", "rm"))]
    if sub in ("run", "run-script", "start", "stop", "restart") or name in ("yarn", "pnpm"):
        # npm run format, yarn lint:fix: the project's own script, code a confining tier runs unasked
        return [runs_code(f"{name} {sub} {first} runs a script of the project; {RUN}".replace("  ", " "))]
    return [ask(f"{name} {sub} is not understood")]


def _cargo(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    found = subcommand(inv.args, "cargo")
    if found is None:
        return unclear(inv)
    sub, rest = found
    for word in inv.args:
        text = word.value
        if text.startswith(("+", "--config", "-Z")) or text in ("--target-dir", "--manifest-path") \
                or text.startswith(("--target-dir=", "--manifest-path=")):
            return [ask(f"cargo {text.split('=', 1)[0]} picks a toolchain, configuration or place the "
                        "project's checks do not need")]
    if sub in ("test", "check", "build", "clippy", "doc", "bench", "tree", "metadata", "run", "") \
            or (sub == "fmt" and any(w.value == "--check" for w in rest)):
        return [runs_code(f"cargo {sub} {RUN}") if sub == "run" else allow(f"cargo {sub} builds or checks")]
    if sub == "fmt" or sub == "fix" or (sub == "clippy" and any(w.value == "--fix" for w in rest)):
        return [ws_write(f"cargo {sub} rewrites the project's sources in place", destructive=True)]
    if sub in ("install", "add", "remove", "update", "fetch", "publish", "search", "login", "logout", "owner",
               "vendor", "yank", "new", "init", "generate-lockfile", "uninstall"):
        network = sub not in ("remove", "new", "init", "uninstall")
        return [ask(f"cargo {sub} needs approval", network=network)]
    # cargo make, cargo insta, cargo xtask: a plugin or an alias of the project, code a confining tier runs
    return [runs_code(f"cargo {sub} runs a cargo plugin or project alias; {RUN}")]


def _go(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    found = subcommand(inv.args, None)
    if found is None:
        return unclear(inv)
    sub, rest = found
    values = [w.value for w in rest]
    if any(v.lstrip("-").split("=", 1)[0] in ("exec", "toolexec", "vettool", "overlay", "modfile")
           for v in values if v.startswith("-")):
        return [ask(f"go {sub} -exec/-toolexec/-vettool runs another program")]
    remote = next((v for v in values if not v.startswith("-") and ("@" in v or _remote_package(v))), None)
    if remote is not None and sub in ("run", "build", "test", "vet", "install", "get", "list", "doc"):
        return [ask(f"go {sub} {remote} fetches and runs code from the network", network=True)]
    if sub in ("test", "vet", "build", "run", "version", "list", "doc") or (sub == "env" and "-w" not in values
                                                                           and "-u" not in values):
        out = [runs_code(f"go {sub} {RUN}") if sub == "run" else allow(f"go {sub} builds or checks")]
        for i, word in enumerate(rest):
            flag = word.value.lstrip("-").split("=", 1)
            if word.value.startswith("-") and flag[0] in ("o", "coverprofile", "cpuprofile", "memprofile",
                                                          "blockprofile", "mutexprofile", "trace", "outputdir"):
                target = Word(flag[1], flag[1], word.params, word.subs) if len(flag) == 2 else \
                    (rest[i + 1] if i + 1 < len(rest) else None)
                if target is not None:
                    out += judge_write(env, target, inv.cwds)
        return out
    if sub == "fmt":
        packages = [Word(w.value.removesuffix("/...") or ".", w.raw) for w in rest if not w.value.startswith("-")]
        return rewrites(inv, env, packages, "go fmt")
    network = sub in ("get", "install", "mod")
    return [ask(f"go {sub} needs approval", network=network)]


def _remote_package(value: str) -> bool:
    """``example.com/x/y``: a package path whose first element is a host, not a local directory."""
    first = value.split("/", 1)[0]
    return "/" in value and "." in first and first not in (".", "..") and not value.endswith(".go")


_MAKE_TARGETS = frozenset({"test", "tests", "check", "lint", "build", "all", "typecheck", "compile"})


def _make(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    args: list[Word] = []
    skip_number = False
    for word in inv.args:              # -j/-l take an optional number: never let them eat a target
        if skip_number and word.value.isdigit():
            skip_number = False
            continue
        skip_number = word.value in ("-j", "--jobs", "-l", "--load-average")
        if not (skip_number or re.fullmatch(r"-[jl]\d*(\.\d+)?|--(jobs|load-average)=\S*", word.value)):
            args.append(word)
    parsed = options("make", args)
    operands = parsed.operands
    if parsed.problem:
        return [ask(f"make: {parsed.problem}")]
    if any("=" in w.value for w in operands):
        return [ask("make variables on the command line can change recipes")]
    for word in values_of(parsed, "-f", "--file", "--makefile"):
        if not word.literal or word.value == "-" or re.match(r"/dev/(stdin|fd/)|/proc/(self|\d+)/fd/", word.value):
            return [ask(f"make reads its makefile from {word.raw!r}, whose recipes the checker cannot see", lift=None)]
    for word in values_of(parsed, "-C", "--directory", "-f", "--file", "--makefile"):
        if any(p.where not in ("inside", "root") for p in env.paths.places(word, inv.cwds)):
            return [ask(f"make uses {word.value!r}, outside the workspace")]
    targets = [w.value for w in operands]
    if all(t in _MAKE_TARGETS for t in targets):
        return [allow(f"make {' '.join(targets) or '(default)'} builds or checks the project")]
    # make format, make docs: the project's own recipes, code a confining tier runs unasked
    return [runs_code(f"make {' '.join(targets)} runs the project's recipes; {RUN}")]


def _system_packages(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """apt, apt-get, brew, dnf, yum, apk, pacman, gem, conda: installing asks."""
    found = subcommand(inv.args, inv.name)
    sub = found[0] if found else ""
    if sub in ("list", "show", "search", "info", "policy", "--version"):
        return [allow(f"{inv.name} {sub} only reads")]
    return [ask(f"{inv.name} {sub} changes installed software", network=True,
                destructive=sub in ("remove", "purge", "uninstall", "autoremove", "erase"))]


JUDGES: dict[str, Judge] = {
    "pip": _pip, "pip3": _pip, "npm": _node_packages, "yarn": _node_packages, "pnpm": _node_packages,
    "cargo": _cargo, "go": _go, "make": _make, "gmake": _make,
}
JUDGES.update({name: _system_packages for name in ("apt", "apt-get", "brew", "dnf", "yum", "apk", "pacman",
                                                   "zypper", "snap", "gem", "conda", "mamba", "bundle")})
