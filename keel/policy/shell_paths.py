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

from keel.policy.paths import is_secret_path
from keel.policy.shell_parse import Cwds, Word

# Credentials outside the workspace: reading them is refused outright.
SECRET_HOME = (".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".config/gcloud", ".config/gh",
               ".password-store", ".local/share/keyrings", ".git-credentials", ".netrc", ".pgpass")
SECRET_SYSTEM = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/root")
STARTUP_FILES = frozenset({".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
                           ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc",
                           ".inputrc", ".xprofile", ".xinitrc", ".pam_environment"})
HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})
MAX_BRACE_WORDS = 64


def within(child: Path, parent: Path) -> bool:
    return child.parts[: len(parent.parts)] == parent.parts


def expand_braces(text: str) -> list[str]:
    """Bash brace expansion for ``{a,b}`` lists (``{1..3}`` sequences become a glob ``*``)."""
    m = re.search(r"\{([^{}]*)\}", text)
    if m is None:
        return [text]
    inner = m.group(1)
    if "," in inner:
        choices = inner.split(",")
    elif ".." in inner:
        choices = ["*"]
    else:
        return [text]
    out: list[str] = []
    for choice in choices:
        out.extend(expand_braces(text[: m.start()] + choice + text[m.end():]))
        if len(out) > MAX_BRACE_WORDS:
            break
    return out[:MAX_BRACE_WORDS]


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

    def expand(self, word: Word) -> list[str] | None:
        """The strings a word becomes after ~, $HOME and brace expansion; None if unknowable."""
        if word.subs or any(p not in ("HOME", "{HOME}") for p in word.params):
            return None
        value = word.value.replace("${HOME}", str(self.home)).replace("$HOME", str(self.home))
        values = expand_braces(value) if word.brace else [value]
        out = []
        for v in values:
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
            where = "root"
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
        for path in place.candidates():
            for rel in SECRET_HOME:
                if within(path, self.home / rel):
                    return f"reads credentials in ~/{rel}"
            for sys_path in SECRET_SYSTEM:
                if within(path, Path(sys_path)) and not within(self.home, Path(sys_path)):
                    return f"reads credentials in {sys_path}"
            if re.fullmatch(r"/proc/[^/]+/environ", str(path)):
                return "reads another process's environment"
        return None

    def secret_file(self, place: Place) -> Path | None:
        """A secret-looking file in the workspace (.env, *.pem): reading it needs approval."""
        for path in place.candidates():
            if is_secret_path(path):
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

    def harmless_sink(self, place: Place) -> bool:
        """/dev/null and friends: writing there changes nothing."""
        return place.lexical is not None and (str(place.lexical) in HARMLESS_DEVICES
                                              or str(place.lexical).startswith("/dev/fd/"))
