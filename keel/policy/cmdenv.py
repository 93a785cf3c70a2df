"""The environment every shell command gets, sandboxed or not: an allow-list of what programs need to
run (never whatever else keel's own environment holds), unable to wait for a pager, editor or prompt
nobody will answer; and the redaction of known secret values from what commands print.

Why an allow-list: a list of secret-looking names missed ``DB_PASS``, ``SLACK_WEBHOOK_URL``,
``SENTRY_DSN``, ``GITLAB_PAT`` and the variable ``--api-key-env`` names (issue 35). A command gets
the shell's basics and locale, certificate and proxy settings, and the variables toolchains read
to find themselves (a venv, conda, pyenv, nvm, volta, Go, Rust, Java, Ruby, .NET, compilers) — each
still dropped when its name or value looks like a credential — plus the names ``[shell] env_pass``
lists in the user's config; never the variable that holds the engine's key.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Mapping

# Names passed when keel has them (exact).
PASSED_NAMES = frozenset({
    # the shell, the user, the terminal, the locale
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TZDIR", "TERM", "TMPDIR", "TMP", "TEMP",
    "COLUMNS", "LINES", "HOSTNAME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "CI",
    # certificates and proxies (a proxy URL with a password in it is dropped by its value)
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    # Python: a venv, conda, pyenv, pipx, uv
    "VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "PYENV_ROOT", "PYENV_VERSION", "PIPX_HOME", "PIPX_BIN_DIR", "MAMBA_ROOT_PREFIX",
    "MAMBA_EXE", "_CE_CONDA", "_CE_M",
    # Node: nvm, volta, fnm, pnpm, corepack, bun, deno
    "NODE_PATH", "NODE_OPTIONS", "NODE_ENV", "VOLTA_HOME", "FNM_DIR", "FNM_MULTISHELL_PATH", "PNPM_HOME",
    "COREPACK_HOME", "BUN_INSTALL", "DENO_DIR", "DENO_INSTALL",
    # Go
    "GOPATH", "GOROOT", "GOBIN", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOPRIVATE", "GONOSUMDB",
    "GONOPROXY", "GONOSUMCHECK", "GOSUMDB", "GOTOOLCHAIN", "GOOS", "GOARCH", "GOAMD64", "CGO_ENABLED", "GO111MODULE",
    "GOENV", "GOTMPDIR", "GOWORK", "GOEXPERIMENT",
    # Rust
    "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "RUSTFLAGS", "RUSTDOCFLAGS", "RUST_BACKTRACE", "RUST_LOG",
    "CARGO_TARGET_DIR", "CARGO_INCREMENTAL", "CARGO_BUILD_JOBS",
    # JVM
    "JAVA_HOME", "JDK_HOME", "JRE_HOME", "MAVEN_HOME", "M2_HOME", "MAVEN_OPTS", "GRADLE_HOME", "GRADLE_USER_HOME",
    "GRADLE_OPTS", "JAVA_OPTS", "JAVA_TOOL_OPTIONS", "KOTLIN_HOME", "SCALA_HOME", "ANDROID_HOME", "ANDROID_SDK_ROOT",
    # Ruby, PHP, .NET, version managers, Homebrew
    "GEM_HOME", "GEM_PATH", "BUNDLE_PATH", "BUNDLE_GEMFILE", "RBENV_ROOT", "RBENV_VERSION", "RUBYLIB",
    "COMPOSER_HOME", "DOTNET_ROOT", "DOTNET_CLI_TELEMETRY_OPTOUT", "DOTNET_NOLOGO", "NUGET_PACKAGES",
    "ASDF_DIR", "ASDF_DATA_DIR", "HOMEBREW_PREFIX", "HOMEBREW_CELLAR", "HOMEBREW_REPOSITORY",
    # compilers and native libraries
    "CC", "CXX", "CPP", "LD", "AR", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS", "PKG_CONFIG_PATH",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "CMAKE_PREFIX_PATH",
    "CMAKE_GENERATOR", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "MANPATH",
    # git's identity (its settings come through GIT_CONFIG_* below)
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_CONFIG_COUNT",
})
# Families passed by prefix: each tool's own settings (a credential among them is dropped by name).
PASSED_PREFIXES = ("LC_", "PYTHON", "PIP_", "UV_", "POETRY_", "PDM_", "HATCH_", "PYTEST_", "CONDA_", "NVM_",
                   "PYENV_", "RBENV_", "npm_config_", "NPM_CONFIG_", "YARN_", "CARGO_", "RUSTUP_", "SDKMAN_",
                   "MISE_", "ASDF_", "DOTNET_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")

_SECRET_NAME_PARTS = ("KEY", "SECRET", "TOKEN", "PASSW", "PASS", "CREDENTIAL", "_AUTH", "AUTH_", "DSN", "WEBHOOK",
                      "PRIVATE", "COOKIE", "SESSION", "SIGNING", "SALT")
_SECRET_NAME_SUFFIXES = ("_PAT", "_PWD", "_PW", "_PIN", "_OTP")
_SECRET_NAME_PREFIXES = ("AWS_", "GH_", "GITHUB_", "OPENAI_", "KEEL_API", "ANTHROPIC_", "AZURE_")
_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "MYSQL_PWD", "PAT"})
_NOT_SECRET_NAMES = frozenset({"GOPRIVATE"})     # a list of module paths, not a private key
# scheme://user:password@host — a password carried inside a URL-valued variable.
_URL_WITH_PASSWORD = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")
_GIT_CONFIG_ENTRY = re.compile(r"GIT_CONFIG_(KEY|VALUE)_(\d+)")
_SECRET_GIT_KEYS = re.compile(r"extraheader|token|passw|credential|auth|secret", re.IGNORECASE)
_GIT_OVERRIDES = (("core.fsmonitor", "false"), ("core.pager", "cat"))


def is_secret_variable(name: str, value: str = "") -> bool:
    """Does the variable look like a credential, by its name or (a URL with a password) its value?"""
    upper = name.upper()
    if _GIT_CONFIG_ENTRY.fullmatch(name) or upper in _NOT_SECRET_NAMES:
        return False     # GIT_CONFIG_*: plain git configuration, judged by the key it sets (_clean_git_config)
    return upper.startswith(_SECRET_NAME_PREFIXES) or _names_a_secret(upper) or bool(_URL_WITH_PASSWORD.search(value))


def _names_a_secret(upper: str) -> bool:
    return (upper in _SECRET_NAMES or upper.endswith(_SECRET_NAME_SUFFIXES)
            or any(part in upper for part in _SECRET_NAME_PARTS))


def passed(name: str, env_pass: Iterable[str] = ()) -> bool:
    """Is ``name`` on the allow-list (``env_pass`` entries are names or ``PREFIX*`` globs)?"""
    return name in PASSED_NAMES or name.startswith(PASSED_PREFIXES) or \
        any(fnmatch.fnmatchcase(name, pattern) for pattern in env_pass)


def allowed_env(env: Mapping[str, str], env_pass: Iterable[str] = (), blocked: Iterable[str] = ()) -> dict[str, str]:
    """The part of ``env`` a command may see: allow-listed names that do not look like credentials,
    plus the user's ``env_pass`` names as they are; never a name in ``blocked``."""
    extra, never = tuple(env_pass), set(blocked)
    out = {}
    for name, value in env.items():
        if name in never:
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in extra):
            out[name] = value            # the person asked for it by name
        elif passed(name) and not is_secret_variable(name, value):
            out[name] = value
    return _clean_git_config(out)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` without variables that look like credentials (the hooks' environment)."""
    return _clean_git_config({k: v for k, v in env.items() if not is_secret_variable(k, v)})


def _clean_git_config(env: dict[str, str]) -> dict[str, str]:
    # GIT_CONFIG_<n> entries cannot be dropped (git insists on every index below GIT_CONFIG_COUNT), so a
    # credential-bearing one (an Authorization extraheader, a credential helper) gets an empty value.
    for name in list(env):
        match = _GIT_CONFIG_ENTRY.fullmatch(name)
        if not match or match.group(1) != "VALUE":
            continue
        key = env.get(f"GIT_CONFIG_KEY_{match.group(2)}", "")
        if _SECRET_GIT_KEYS.search(key) or _URL_WITH_PASSWORD.search(env[name]):
            env[name] = ""
    return env


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


def command_environment(base: Mapping[str, str], env_pass: Iterable[str] = (),
                        blocked: Iterable[str] = ()) -> dict[str, str]:
    """The environment for any command: the allow-list of ``base``, unable to wait for a pager,
    editor or prompt."""
    env = allowed_env(base, env_pass, blocked)
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


# ---------------------------------------------------------------- redaction

MIN_REDACTED = 8     # shorter values ("1", "true", a port) would blank out ordinary output
REDACTED = "[redacted: a secret value keel knows]"


class Redactor:
    """Replaces known secret values (the engine's key, credential-looking variables of keel's own
    environment) in text on its way to the model or the event log: a command may print one it found
    elsewhere (a config file, the Landlock tier's readable .env)."""

    def __init__(self, values: Iterable[str]) -> None:
        kept = sorted({v for v in values if len(v) >= MIN_REDACTED}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in kept)) if kept else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)


def secret_values(env: Mapping[str, str], also: Iterable[str | None] = ()) -> list[str]:
    """The values worth redacting: ``also`` (the engine's key), the values of variables whose name says
    they hold a credential (not those merely from a cloud vendor: AWS_REGION is no secret), and the
    password inside a URL-valued variable."""
    found = [v for v in also if v]
    for name, value in env.items():
        upper = name.upper()
        if _GIT_CONFIG_ENTRY.fullmatch(name) or upper in _NOT_SECRET_NAMES or upper == "SSH_AUTH_SOCK":
            continue
        if _names_a_secret(upper) and _secret_shaped(value):
            found.append(value)
        for m in _URL_WITH_PASSWORD.finditer(value):
            found += [value, m.group(0).rsplit(":", 1)[1][:-1]]
    return found


def _secret_shaped(value: str) -> bool:
    """A value that could be a credential, not a word, a number or a path (AUTH_TYPE=password and
    SESSION_TIMEOUT=86400000 must not blank those words out of every output)."""
    if len(value) < MIN_REDACTED or any(c.isspace() for c in value) or value.startswith(("/", "~", ".")):
        return False
    return not (value.isdigit() or (value.isalpha() and len(value) < 16))
