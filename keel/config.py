"""Configuration: flags > environment > user config > project config > defaults.

A project's ``.keel/config.toml`` arrives with a cloned repository, so it is not trusted with
anything that decides where requests and keys go, or that loosens permissions: those keys are
ignored there (with a warning), and only tightening rules (ask/deny) are taken from it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineSettings(_Section):
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None   # name of the variable holding the key (never the key itself)
    temperature: float = 0.0
    seed: int | None = 1234
    tool_choice: str = "auto"
    max_tokens: int | None = 4096    # per reply: a runaway generation is cut, not waited for
    timeout_s: float = 300.0
    max_attempts: int = 4
    stream: bool = True              # false for servers that cannot stream tool calls
    extra_body: dict[str, Any] = Field(default_factory=dict)


class LimitSettings(_Section):
    max_steps: int = 50
    max_seconds: float | None = None
    max_tokens: int | None = None
    budget_usd: float | None = None
    max_pushbacks_without_progress: int = 3
    max_idle_turns: int = 6


class PriceSettings(_Section):
    input_per_m: float = 0.0
    cached_input_per_m: float = 0.0
    output_per_m: float = 0.0


class ShellSettings(_Section):
    timeout_s: float = 120.0
    output_cap_bytes: int = 30_000
    sandbox: Literal["auto", "off"] = "auto"
    network: bool = False


class PermissionSettings(_Section):
    approval: Literal["unattended", "interactive", "auto-edit"] | None = None
    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class Config(_Section):
    engine: EngineSettings = Field(default_factory=EngineSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    prices: PriceSettings = Field(default_factory=PriceSettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)


class ConfigError(Exception):
    """Invalid configuration; the message says which file and key."""


# Keys a project file may not set: they redirect requests/keys or loosen permissions.
UNTRUSTED_IN_PROJECT = {("engine", "base_url"), ("engine", "api_key_env"), ("engine", "extra_body"),
                        ("permissions", "allow"), ("permissions", "approval"), ("shell", "sandbox"),
                        ("shell", "network")}


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "keel" / "config.toml"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _strip_untrusted(project: dict[str, Any], warnings: list[str], path: Path) -> dict[str, Any]:
    clean = {k: dict(v) if isinstance(v, dict) else v for k, v in project.items()}
    for section, key in sorted(UNTRUSTED_IN_PROJECT):
        if isinstance(clean.get(section), dict) and key in clean[section]:
            del clean[section][key]
            warnings.append(f"{path}: ignored [{section}] {key} (a project file may not set it; "
                            "put it in your user config or pass a flag)")
    return clean


def _validate(data: dict[str, Any], source: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"{source}: {problems}") from e


def load_config(workspace: Path, *, user_path: Path | None = None,
                env: dict[str, str] | None = None,
                flags: dict[str, Any] | None = None) -> tuple[Config, list[str]]:
    """Merge every layer; returns the config and warnings to show the user."""
    env = dict(os.environ) if env is None else env
    warnings: list[str] = []
    project_path = workspace / ".keel" / "config.toml"
    user_path = user_path or user_config_path()
    project = _strip_untrusted(_read_toml(project_path), warnings, project_path)
    _validate(project, str(project_path))
    user = _read_toml(user_path)
    _validate(user, str(user_path))
    merged = _merge(project, user)
    # Project rules may tighten (ask/deny) in addition to the user's own.
    for kind in ("ask", "deny"):
        extra = project.get("permissions", {}).get(kind, [])
        if extra and user.get("permissions", {}).get(kind):
            merged["permissions"][kind] = list(user["permissions"][kind]) + list(extra)

    env_layer: dict[str, Any] = {"engine": {}}
    base_url = env.get("KEEL_BASE_URL") or env.get("OPENAI_BASE_URL")
    if base_url:
        env_layer["engine"]["base_url"] = base_url
    if env.get("KEEL_MODEL"):
        env_layer["engine"]["model"] = env["KEEL_MODEL"]
    merged = _merge(merged, env_layer)
    if flags:
        merged = _merge(merged, {s: {k: v for k, v in vals.items() if v is not None}
                                 for s, vals in flags.items()})
    return _validate(merged, "configuration"), warnings


def resolve_api_key(config: Config, env: dict[str, str] | None = None) -> str | None:
    """The key comes from the environment only: the variable named by api_key_env, else the defaults."""
    env = dict(os.environ) if env is None else env
    if config.engine.api_key_env:
        return env.get(config.engine.api_key_env)
    return env.get("KEEL_API_KEY") or env.get("OPENAI_API_KEY")
