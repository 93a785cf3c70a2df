"""Where the engine's API key comes from: the variable it is read from (never passed to a command,
keel.policy.cmdenv) and, for a refusal to name, where the key that was sent came from."""

from __future__ import annotations

import os

from keel.config import Config


def api_key_variables(config: Config) -> tuple[str, ...]:
    """The variables the engine's key may come from: never passed to a command (keel.policy.cmdenv)."""
    return (config.engine.api_key_env,) if config.engine.api_key_env else ("KEEL_API_KEY", "OPENAI_API_KEY")


def key_source(config: Config, env: dict[str, str] | None = None, *, given: bool = False) -> str:
    """Where the key sent to the engine came from, or why none was sent, for a refusal to name:
    the server rejecting a key and a key that never left keel are fixed differently."""
    env = dict(os.environ) if env is None else env
    name = config.engine.api_key_env
    if given:
        return "the API key given in code (api_key=)"
    if name:
        return (f"the API key from ${name} (--api-key-env / [engine] api_key_env)" if env.get(name) else
                f"no API key was sent: --api-key-env / [engine] api_key_env names ${name}, which is not set")
    for default in ("KEEL_API_KEY", "OPENAI_API_KEY"):
        if env.get(default):
            return f"the API key from ${default}"
    return "no API key was sent: KEEL_API_KEY and OPENAI_API_KEY are not set (or name another with --api-key-env)"


def resolve_api_key(config: Config, env: dict[str, str] | None = None) -> str | None:
    """The key comes from the environment only: the variable named by api_key_env, else the defaults."""
    env = dict(os.environ) if env is None else env
    if config.engine.api_key_env:
        return env.get(config.engine.api_key_env)
    return env.get("KEEL_API_KEY") or env.get("OPENAI_API_KEY")
