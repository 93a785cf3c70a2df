"""Which directories may be a workspace: the one check `keel run`, the REPL, ACP, MCP and the library's
``Agent`` all make before anything runs.

The workspace is what the sandbox makes writable, what the file tools may read and edit, and what
commands run in, so some places never may be one:

- credential folders (``~/.ssh``, ``~/.aws``, ``~/.gnupg``, keel's own data …: the shell policy's
  list, keel.policy.shell.paths.SECRET_HOME), anything inside one, and every folder that holds one
  that exists (``~/.config`` holding ``~/.config/gcloud``; ``$HOME`` and ``/`` once there is a
  ``~/.ssh``). Nothing lifts this: the file tools would read the keys as ordinary workspace files;
- ``/``, system directories and trees, ``$HOME`` and its ancestors: refused unless the person passes
  ``--allow-any-cwd`` (a root container may keep its project in ``/srv``).
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from keel.policy.shell.paths import SECRET_HOME

# Refused as a workspace, together with everything below them: system trees where an agent with
# write access does damage, and pseudo-filesystems.
SYSTEM_TREES = ("/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc", "/sys",
                "/dev", "/usr")
# Project code does live below these (/usr/src/app in container images, /var/www, /tmp/x, /opt/app),
# so only the directories themselves are refused.
SYSTEM_DIRS = ("/", "/tmp", "/var", "/var/tmp", "/var/lib", "/var/log", "/opt", "/srv", "/home", "/mnt",
               "/media", "/run", "/root", "/snap", "/usr/local")
ALLOWED_UNDER_USR = ("/usr/src", "/usr/local/src")
# keel's own data and configuration: other projects' session logs and snapshot packs, the API key.
KEEL_HOME_DIRS = (".local/share/keel", ".config/keel")


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _homes(home: Path | None) -> tuple[list[Path], list[Path]]:
    """(the person's own homes, every other account's when keel runs as root)."""
    own = [home] if home is not None else []
    for text in (os.environ.get("HOME"), os.path.expanduser("~")):
        if text and os.path.isabs(text):
            own.append(Path(os.path.realpath(text)))
    own = [h for h in dict.fromkeys(own) if h != Path("/")]
    others: list[Path] = []
    if os.geteuid() == 0:          # root may be pointed at any user's keys
        others = [Path(e.pw_dir) for e in pwd.getpwall() if os.path.isabs(e.pw_dir) and e.pw_dir != "/"]
    return own, [h for h in dict.fromkeys(others) if h not in own]


def credential_folders(home: Path | None = None) -> list[tuple[str, str, bool]]:
    """(folder, how to name it, whether a folder holding it is refused too) for every credential folder
    of every home keel knows of. The person's own are resolved when they are symlinks (~/.ssh pointing
    into /data); other accounts' are taken as written (a stat each would cost a run's start-up). keel's
    data where ``KEEL_HOME``/``XDG_*_HOME`` moved it is refused only as a workspace or inside one: a
    person who keeps it in a project chose that."""
    own, others = _homes(home)
    folders = []
    for h in [*own, *others]:
        base = str(h).rstrip("/")
        for rel in (*SECRET_HOME, *KEEL_HOME_DIRS):
            folder = f"{base}/{rel}"
            if h in own and os.path.islink(folder):
                folder = os.path.realpath(folder)
            folders.append((folder, f"~/{rel}" if own and h == own[0] else f"{base}/{rel}", True))
    for var, sub in (("KEEL_HOME", ""), ("XDG_DATA_HOME", "keel"), ("XDG_CONFIG_HOME", "keel")):
        if os.path.isabs(os.environ.get(var, "")):
            where = Path(os.path.realpath(os.environ[var])) / sub
            folders.append((str(where), str(where), False))
    return folders


def _under(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def credential_problem(path: Path, home: Path | None = None) -> str | None:
    """Why ``path`` (resolved) must never be a workspace because of credentials, or None."""
    text = str(path)
    for folder, shown, parents in credential_folders(home):
        where = folder
        if _under(text, where):
            return f"refusing {path} as the workspace: it is inside the credential folder {shown} (nothing lifts this)"
        if parents and _under(where, text) and os.path.lexists(where):
            return (f"refusing {path} as the workspace: it holds the credential folder {shown}, which the file "
                    "tools and commands would then reach (nothing lifts this); choose a project directory")
    return None


def workspace_problem(path: Path, home: Path | None = None, *, allow_any: bool = False) -> str | None:
    """Why ``path`` (resolved) must not be a workspace, or None when it may. ``allow_any``
    (``--allow-any-cwd``; the library's default) lifts the system and home refusals, never the
    credential one."""
    if not path.exists():
        return f"{path}: no such directory"
    if not path.is_dir():
        return f"{path}: not a directory"
    if home is None:
        home_text = os.environ.get("HOME")
        home = Path(home_text).resolve() if home_text else None
    if allow_any:
        return credential_problem(path, home)
    if home is not None and (path == home or path in home.parents):
        what = "your home directory" if path == home else "an ancestor of your home directory"
        return f"refusing {path} as the workspace: it is {what}; choose a project directory"
    if str(path) in SYSTEM_DIRS:
        return f"refusing {path} as the workspace: it is a system directory; choose a project directory"
    for tree in SYSTEM_TREES:
        if _within(path, Path(tree)) and not any(_within(path, Path(ok)) for ok in ALLOWED_UNDER_USR):
            return f"refusing {path} as the workspace: it is inside the system directory {tree}"
    return credential_problem(path, home)


def library_problem(path: Path) -> str | None:
    """The check of the library's ``Agent`` (which has no ``--allow-any-cwd``): a directory, never "/"
    or ``$HOME`` (the sandbox would fence nothing), and never a credential folder."""
    if not path.is_dir():
        return f"workspace {path} is not a directory"
    if path == Path(path.anchor) or path == Path.home().resolve():
        return f"refusing {path} as the workspace: choose a project directory"
    return workspace_problem(path, allow_any=True)
