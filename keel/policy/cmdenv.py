"""The environment every shell command gets, sandboxed or not: scrubbed of credentials, and unable
to wait for a pager, editor or prompt nobody will answer."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

_SECRET_NAME_PARTS = ("KEY", "SECRET", "TOKEN", "PASSW", "CREDENTIAL", "_AUTH")
_SECRET_NAME_PREFIXES = ("AWS_", "GH_", "GITHUB_", "OPENAI_", "KEEL_API", "ANTHROPIC_", "AZURE_")
_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "MYSQL_PWD"})
# scheme://user:password@host — a password carried inside a URL-valued variable.
_URL_WITH_PASSWORD = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")


def is_secret_variable(name: str, value: str = "") -> bool:
    upper = name.upper()
    return (
        upper in _SECRET_NAMES
        or upper.startswith(_SECRET_NAME_PREFIXES)
        or any(part in upper for part in _SECRET_NAME_PARTS)
        or bool(_URL_WITH_PASSWORD.search(value))
    )


_GIT_CONFIG_ENTRY = re.compile(r"GIT_CONFIG_(KEY|VALUE)_(\d+)")
_SECRET_GIT_KEYS = re.compile(r"extraheader|token|passw|credential|auth|secret", re.IGNORECASE)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` without variables that look like credentials."""
    clean = {k: v for k, v in env.items()
             if _GIT_CONFIG_ENTRY.fullmatch(k) or not is_secret_variable(k, v)}
    # GIT_CONFIG_KEY_<n> has "KEY" in its name but is plain git configuration. Entries cannot be
    # dropped (git insists on every index below GIT_CONFIG_COUNT), so a credential-bearing one
    # (an Authorization extraheader, a credential helper) gets an empty value, which resets it.
    for name in list(clean):
        match = _GIT_CONFIG_ENTRY.fullmatch(name)
        if not match or match.group(1) != "VALUE":
            continue
        key = clean.get(f"GIT_CONFIG_KEY_{match.group(2)}", "")
        if _SECRET_GIT_KEYS.search(key) or _URL_WITH_PASSWORD.search(clean[name]):
            clean[name] = ""
    return clean


_GIT_OVERRIDES = (("core.fsmonitor", "false"), ("core.pager", "cat"))


def _add_git_config(env: dict[str, str]) -> None:
    """Append keel's git settings after any the caller passed via GIT_CONFIG_COUNT."""
    count = int(env.get("GIT_CONFIG_COUNT", "0")) if env.get("GIT_CONFIG_COUNT", "0").isdigit() else -1
    if count < 0:
        # A malformed count makes git refuse to run; start a clean, valid list instead.
        for name in [k for k in env if _GIT_CONFIG_ENTRY.fullmatch(k)]:
            del env[name]
        count = 0
    for key, value in _GIT_OVERRIDES:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)


def with_own_bin(path: str) -> str:
    """``path`` with the bin directory of the Python running keel appended when it is not there:
    keel started by its path from a virtualenv nobody activated (``venv/bin/keel run``) finds the
    tools installed next to it (ruff, mypy) as it would activated; whatever PATH finds still wins."""
    own = os.path.dirname(sys.executable)
    dirs = path.split(os.pathsep) if path else []
    return path if not own or own in dirs else os.pathsep.join([*dirs, own])


def command_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The environment for any command: scrubbed, and unable to wait for a pager, editor or prompt."""
    env = scrub_env(base)
    if env.get("PATH"):   # check detection looks for tools on the same PATH (keel.verify.detect.common)
        env["PATH"] = with_own_bin(env["PATH"])
    env.update({
        "GIT_PAGER": "cat", "PAGER": "cat", "GIT_TERMINAL_PROMPT": "0",
        # `git commit` without -m must fail at once, not wait for an editor nobody sees.
        "GIT_EDITOR": "true",
        "TERM": "dumb", "NO_COLOR": "1", "PIP_NO_INPUT": "1",
    })
    _add_git_config(env)
    return env
