"""Where a word of a shell command points, judged the way the kernel will see it.

Paths are expanded (``~``, ``$HOME``, brace expansion), resolved against every directory the
command may run in, then through symlinks (those on disk and those the same command line
creates with ``ln -s``) and compared by components with the workspace, never by string
prefix. A path that depends on a variable or a substitution is "unknown", not "inside".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from keel.policy.shell.parse import Cwds, Word
from keel.policy.shell.secrets import is_secret

# Credentials outside the workspace: reading them is refused outright.
SECRET_HOME = (".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".config/gcloud", ".config/gh",
               ".password-store", ".local/share/keyrings", ".git-credentials", ".netrc", ".pgpass",
               ".vault-token", ".config/hub", ".cargo/credentials", ".cargo/credentials.toml", ".npmrc", ".pypirc",
               ".terraform.d", ".m2/settings.xml", ".gem/credentials", ".config/op", ".authinfo", ".authinfo.gpg",
               ".boto", ".s3cfg", ".config/rclone", ".kaggle", ".cache/huggingface/token", ".config/git/credentials",
               ".local/share/keel", ".config/keel", ".docker/config.json", ".config/anthropic", ".config/openai",
               # shell and REPL histories hold tokens typed on command lines
               ".bash_history", ".zsh_history", ".zhistory", ".history", ".sh_history", ".python_history",
               ".node_repl_history", ".psql_history", ".mysql_history", ".sqlite_history", ".rediscli_history",
               ".local/share/fish/fish_history", ".ipython", ".local/share/atuin", ".mozilla", ".config/chromium",
               ".config/google-chrome", ".thunderbird",
               # from each tool's own documentation of where it keeps credentials:
               ".config/sops/age",                  # sops: age keys (github.com/getsops/sops#encrypting-using-age)
               ".databrickscfg",                    # Databricks CLI config profiles with tokens
               ".terraformrc", ".terraform.rc",     # Terraform CLI config: `credentials` blocks
               ".gradle/gradle.properties",         # Gradle: repository and signing passwords
               ".config/doctl",                     # DigitalOcean doctl: access-token in config.yaml
               ".oci",                              # Oracle Cloud CLI: ~/.oci/config and API keys
               ".my.cnf", ".mylogin.cnf",           # MySQL option files: [client] password
               ".huggingface", ".config/huggingface",  # huggingface_hub token (old and XDG locations)
               ".yarnrc.yml", ".yarnrc",            # Yarn: npmAuthToken
               ".bundle/config",                    # Bundler: BUNDLE_<HOST> credentials
               ".ngrok2", ".config/ngrok",          # ngrok agent: authtoken in ngrok.yml
               ".config/helm",                      # Helm: repository passwords in repositories.yaml
               ".config/containers/auth.json", ".config/containers",  # podman/skopeo registry auth
               ".config/glab-cli",                  # GitLab CLI: token in config.yml
               ".fly",                              # flyctl: access_token in ~/.fly/config.yml
               ".netlify", ".config/netlify",       # Netlify CLI: auth token
               ".config/configstore",               # firebase-tools, vercel and others: tokens (configstore)
               ".wrangler", ".config/.wrangler",    # Cloudflare wrangler: OAuth tokens
               ".snowflake",                        # Snowflake: connections.toml passwords
               ".dbt",                              # dbt: profiles.yml database passwords
               ".pulumi/credentials.json",          # Pulumi: access tokens
               ".config/heroku", ".heroku",         # Heroku CLI (its token also lives in ~/.netrc)
               ".composer/auth.json", ".config/composer/auth.json",  # Composer: auth.json
               ".config/vercel", ".vercel",         # Vercel CLI: auth.json
               ".config/stripe",                    # Stripe CLI: config.toml with keys
               ".config/gitlab-runner", ".travis", ".circleci/cli.yml",  # CI CLIs' tokens
               ".config/rclone", ".local/share/kwalletd", ".local/share/gnome-keyring",
               ".config/1Password", ".config/Bitwarden CLI", ".config/sops",
               ".age", ".config/age",               # age identity files
               ".ansible/vault_pass", ".vault_pass", ".vault_pass.txt",
               ".config/pip/pip.conf", ".pip/pip.conf", ".config/uv/uv.toml",  # index URLs with passwords
               ".condarc",                          # conda channels with tokens
               ".config/tabnine", ".config/github-copilot", ".config/Code/User/globalStorage",
               ".cargo/config.toml",                # registry tokens may sit here too
               ".ollama/id_ed25519",                # ollama client key
               ".local/share/containers/auth.json", ".config/openstack", ".config/linode-cli",
               ".config/hcloud", ".config/scw", ".config/exoscale", ".bluemix", ".ibmcloud",
               ".aliyun", ".tccli", ".config/vultr-cli.yaml", ".config/cloudflared", ".cloudflared")
SECRET_SYSTEM = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/root",
                 "/run/secrets", "/var/run/secrets", "/etc/kubernetes", "/var/lib/kubelet")
STARTUP_FILES = frozenset({".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
                           ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc",
                           ".inputrc", ".xprofile", ".xinitrc", ".pam_environment"})
# Workspace files that make other programs run commands later (git, direnv, editors, agents,
# dev containers, hook managers): writing them is never part of "workspace-write".
RUNS_LATER_DIRS = frozenset({".git", ".keel", ".claude", ".devcontainer", ".husky", ".vscode", ".cursor",
                             ".idea", ".githooks", ".gemini", ".codex", ".continue", ".windsurf", ".zed", ".roo",
                             ".mvn", ".vim", ".nvim", ".helix", ".fleet", ".run", ".amazonq",
                             ".kiro", ".clinerules", ".trae", ".junie", ".augment", ".opencode",
                             ".qwen", ".openhands"})   # Qwen Code's hooks and servers; OpenHands runs setup.sh
# Hook managers whose hooks are already installed read these on every commit keel allows.
RUNS_LATER_FILES = frozenset({".mcp.json", ".envrc", ".pre-commit-config.yaml", ".gitmodules",
                              ".gitattributes", ".bazelrc", ".npmrc", ".yarnrc", ".yarnrc.yml", "lefthook.yml",
                              ".lefthook.yml", "lefthook-local.yml", ".overcommit.yml", ".aider.conf.yml",
                              # run by an interpreter or editor a person starts in the directory:
                              ".rprofile", ".renviron",       # R sources ./.Rprofile at start (?Startup)
                              ".exrc", ".nvimrc", ".nvim.lua", ".vimrc", ".lvimrc", ".gvimrc",  # vim/nvim 'exrc'
                              ".pythonrc", ".pythonrc.py",    # PYTHONSTARTUP targets by convention
                              "sitecustomize.py", "usercustomize.py",  # imported by `site` when on sys.path
                              ".irbrc", ".pryrc", ".gemrc",   # irb/pry load ./.irbrc, ./.pryrc
                              ".gdbinit", ".lldbinit",        # gdb/lldb read ./.gdbinit when auto-load allows
                              ".tmux.conf", ".guile", ".sbtopts", ".jvmopts", ".sbtrc", ".psqlrc", ".sqliterc",
                              ".bunfig.toml", "bunfig.toml",
                              ".tool-versions", ".mise.toml", "mise.toml", ".rtx.toml",  # mise/asdf hooks
                              ".hgrc", "justfile.local", ".lintstagedrc", ".huskyrc", ".clinerules",
                              "devbox.json", ".flox", "flake.nix", ".direnvrc", ".env.sh",
                              # Anthropic's sandbox-runtime denies writes to these in any writable folder
                              # (anthropic-experimental/sandbox-runtime, src/sandbox/sandbox-utils.ts,
                              # DANGEROUS_FILES at 05014eae6d552417670375018516be968792d8ec)
                              ".gitconfig", ".ripgreprc", ".bashrc", ".bash_profile", ".zshrc", ".zprofile",
                              ".profile", ".claude.json"})
# Files that run later by their suffix: Python runs every .pth file in site-packages at start.
RUNS_LATER_SUFFIXES = (".pth",)
HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})
MAX_BRACE_WORDS = 64


def within(child: Path, parent: Path) -> bool:
    return child.parts[: len(parent.parts)] == parent.parts


def runs_later(path: Path, root: Path) -> bool:
    """Is ``path`` (inside ``root``) a file other programs run commands from later?"""
    if not within(path, root):
        return False
    parts = [p.lower() for p in path.parts[len(root.parts):]]      # .Claude is .claude on macOS
    return bool(parts) and (any(p in RUNS_LATER_DIRS for p in parts) or parts[-1] in RUNS_LATER_FILES
                            or parts[-1].endswith(RUNS_LATER_SUFFIXES))


_BRACE = re.compile(r"\{([^{}]*(?:,|\.\.)[^{}]*)\}")


def expand_braces(text: str) -> list[str] | None:
    """Bash brace expansion of ``{a,b}`` lists (``{1..3}`` sequences become a glob ``*``).

    None when the expansion would exceed MAX_BRACE_WORDS words: the words are then unknown.
    """
    results = [text]
    for _ in range(MAX_BRACE_WORDS):
        expanded: list[str] = []
        changed = False
        for item in results:
            m = _BRACE.search(item)
            if m is None:
                expanded.append(item)
                continue
            changed = True
            choices = m.group(1).split(",") if "," in m.group(1) else ["*"]
            expanded.extend(item[: m.start()] + choice + item[m.end():] for choice in choices)
            if len(expanded) > MAX_BRACE_WORDS:
                return None
        results = expanded
        if not changed:
            return results
    return None


_SEQUENCE = re.compile(r"\{(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?\}")


def expand_argv_word(text: str) -> list[str] | None:
    """Brace expansion as bash does it to a command's words (``{-o,/tmp/x}`` becomes two words,
    ``-{a..c}`` three); None when there would be more than MAX_BRACE_WORDS."""
    results = [text]
    for _ in range(MAX_BRACE_WORDS):
        expanded: list[str] = []
        changed = False
        for item in results:
            seq = _SEQUENCE.search(item)
            lst = _BRACE.search(item)
            m = seq if seq is not None and (lst is None or seq.start() <= lst.start()) else lst
            if m is None:
                expanded.append(item)
                continue
            changed = True
            if m is seq:
                choices = _sequence(m.group(1), m.group(2), m.group(3))
                if choices is None:
                    return None
            else:
                choices = m.group(1).split(",")
            expanded.extend(item[: m.start()] + choice + item[m.end():] for choice in choices)
            if len(expanded) > MAX_BRACE_WORDS:
                return None
        results = expanded
        if not changed:
            return results
    return None


def _sequence(first: str, last: str, step_text: str | None) -> list[str] | None:
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(v) for v in values] if len(values) <= MAX_BRACE_WORDS else None
    if len(first) == 1 and len(last) == 1 and first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(v) for v in values] if len(values) <= MAX_BRACE_WORDS else None
    return None


@dataclass(frozen=True)
class Place:
    text: str                 # the path as written
    real: Path | None         # where it really points; None: unknown until the command runs
    lexical: Path | None      # absolute with '..' folded, symlinks not followed
    where: str                # "root" (the workspace itself) | "inside" | "outside" | "unknown"
    glob_tail: bool = False   # the last component is a glob: everything in ``real`` is hit
    leading_unknown: bool = False  # starts with an expansion: may be '' or '/' at run time

    def candidates(self) -> list[Path]:
        return [p for p in (self.real, self.lexical) if p is not None]


class PathJudge:
    def __init__(self, workspace: Path, home: Path) -> None:
        self.root = Path(os.path.realpath(workspace))
        self.home = home
        self.links: dict[Path, Path] = {}     # symlinks this command line creates
        self.dash_names = False               # this line writes a file whose name starts with "-"
        self._memo: dict[tuple[str, Path | None, bool, int], Place] = {}
        self._secret_memo: dict[Place, str | None] = {}
        self._secret_roots = [(home / rel, f"reads credentials in ~/{rel}") for rel in SECRET_HOME]
        self._secret_roots += [(Path(p), f"reads credentials in {p}") for p in SECRET_SYSTEM
                               if not within(home, Path(p))]
        self._data_roots: set[Path] = {home / ".local/share/keel", home / ".config/keel"}
        for var, sub in (("KEEL_HOME", ""), ("XDG_DATA_HOME", "keel"), ("XDG_CONFIG_HOME", "keel")):
            if os.path.isabs(os.environ.get(var, "")):     # keel's data moved: still its sessions and keys
                where = Path(os.path.realpath(os.environ[var])) / sub
                self._secret_roots.append((where, "reads keel's own data or configuration"))
                self._data_roots.add(where)


    def project_program(self, word: Word, cwds: Cwds) -> bool:
        """``./scripts/x.sh``, ``bin/tool``: a file of the workspace (every way the word resolves),
        outside protected and run-later places."""
        places = self.places(word, cwds)
        return bool(places) and all(
            p.where == "inside" and p.real is not None and p.real.is_file() and not self.protected_reason(p)
            and self.runs_later_reason(p) is None for p in places)
    def expand(self, word: Word) -> list[str] | None:
        """The strings a word becomes after ~, $HOME and brace expansion; None if unknowable."""
        if word.subs or any(p not in ("HOME", "{HOME}") for p in word.params):
            return None
        value = word.value.replace("${HOME}", str(self.home)).replace("$HOME", str(self.home))
        values = expand_braces(value) if word.brace else [value]
        if values is None:
            return None
        out = []
        for v in values:
            if v.startswith(("~+", "~-")):
                return None                   # $PWD / $OLDPWD: only known when it runs
            if v == "~" or v.startswith("~/"):
                v = str(self.home) + v[1:]
            elif v.startswith("~"):
                v = os.path.expanduser(v)
            out.append(v)
        return out

    def places(self, word: Word, cwds: Cwds) -> list[Place]:
        values = self.expand(word)
        if values is None:
            leading = word.raw.lstrip("\"'").startswith(("$", "`"))
            return [Place(word.value, None, None, "unknown", leading_unknown=leading)]
        return [self.place(v, cwd, word.glob) for v in values for cwd in (cwds or {None})]

    def place(self, text: str, cwd: Path | None, glob: bool = False) -> Place:
        key = (text, cwd, glob, len(self.links))
        if key not in self._memo:
            self._memo[key] = self._place(text, cwd, glob)
        return self._memo[key]

    def _place(self, text: str, cwd: Path | None, glob: bool) -> Place:
        base_text, glob_tail = text, False
        if glob and re.search(r"[*?\[]", text):
            parts = text.split("/")
            first = next(i for i, p in enumerate(parts) if re.search(r"[*?\[]", p))
            glob_tail = all(p == "" for p in parts[first + 1:])
            base_text = "/".join(parts[:first]) or ("/" if text.startswith("/") else ".")
        if os.path.isabs(base_text):
            absolute = Path(base_text)
        elif cwd is None:
            return Place(text, None, None, "unknown", glob_tail)
        else:
            absolute = cwd / base_text
        lexical = Path(os.path.normpath(absolute))
        real = self._resolve(absolute)
        if real == self.root:
            # a glob with components after it (*/build) names things strictly below the root
            where = "root" if base_text == text or glob_tail else "inside"
        elif within(real, self.root):
            where = "inside"
        else:
            where = "outside"
        return Place(text, real, lexical, where, glob_tail)

    def _resolve(self, absolute: Path) -> Path:
        real = Path(os.path.realpath(absolute))
        for _ in range(8):              # links made earlier on this command line
            for link, target in self.links.items():
                if within(real, link):
                    real = Path(os.path.realpath(target / real.relative_to(link)))
                    break
            else:
                return real
        return real

    def add_link(self, target: str, link: Path) -> None:
        """Remember ``ln -s target link`` so later words through ``link`` resolve to ``target``."""
        destination = Path(target) if os.path.isabs(target) else link.parent / target
        self.links[link] = Path(os.path.realpath(destination))

    # -- what a place is --------------------------------------------------------------------

    def secret_reason(self, place: Place) -> str | None:
        """Credentials outside the project: never read (deny)."""
        if place not in self._secret_memo:
            self._secret_memo[place] = self._secret_reason(place)
        return self._secret_memo[place]

    def _secret_reason(self, place: Place) -> str | None:
        for path in place.candidates():
            for root, reason in self._secret_roots:
                if within(path, root) and not (root in self._data_roots and within(path, self.root)):
                    return reason            # (a workspace keel keeps in its data dir — the gate's copies — is work)
            if re.fullmatch(r"/proc/[^/]+/(task/[^/]+/)?(environ|mem)", str(path)):
                return "reads a process's environment or memory"
        return None

    def secret_file(self, place: Place) -> Path | None:
        """A secret-looking file in the workspace (.env, *.pem): reading it needs approval."""
        for path in place.candidates():
            if is_secret(str(path)):
                return path
        return None

    def protected_reason(self, place: Place) -> str | None:
        """Writing here makes code run later or escapes the machine: deny."""
        for path in place.candidates():
            parts = path.parts
            for i in range(len(parts) - 1):
                if parts[i] == ".git" and parts[i + 1] == "hooks":
                    return "writes git hooks, which run code on the next git command"
            if len(parts) >= 2 and parts[-2:] == (".git", "config"):
                return "writes .git/config, which can make git run programs"
            if path.parent == self.home and path.name in STARTUP_FILES:
                return f"writes the shell start-up file ~/{path.name}"
            if within(path, self.home / ".config" / "fish") or within(path, self.home / ".config" / "autostart"):
                return "writes a start-up file in ~/.config"
            text = str(path)
            if text.startswith(("/dev/tcp/", "/dev/udp/")):
                return "opens a network connection through /dev/tcp"
            if within(path, Path("/dev")) and text not in HARMLESS_DEVICES and not text.startswith("/dev/fd/"):
                return f"writes the device {text}"
            if within(path, Path("/etc")):
                return f"writes system configuration in {text}"
        return None

    def runs_later_reason(self, place: Place) -> str | None:
        """A workspace file whose contents other programs run later (hooks, agent and editor settings)."""
        if any(runs_later(path, self.root) for path in place.candidates()):
            return "a file other programs run commands from later"
        return None

    def harmless_sink(self, place: Place) -> bool:
        """/dev/null and friends: writing there changes nothing."""
        return place.lexical is not None and (str(place.lexical) in HARMLESS_DEVICES
                                              or str(place.lexical).startswith("/dev/fd/"))


def expand_brace_words(words: list[Word]) -> list[Word] | None:
    """A command's words after brace expansion (None: too many to check)."""
    out: list[Word] = []
    for word in words:
        if not word.brace:
            out.append(word)
            continue
        values = expand_argv_word(word.value)
        if values is None:
            return None
        out += [Word(v, word.raw, word.params, word.subs, word.glob, False) for v in values]
    return out
