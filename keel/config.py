"""Configuration: flags > environment > user config > project config > defaults.

A project's ``.keel/config.toml`` arrives with a cloned repository, so it is not trusted with
anything that decides where requests and keys go, or that loosens permissions: those keys are
ignored there (with a warning), and only tightening rules (ask/deny) are taken from it.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from keel.core.assists import Assists, choose


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineSettings(_Section):
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None   # name of the variable holding the key (never the key itself)
    temperature: float = Field(default=0.0, ge=0)
    seed: int | None = 1234
    tool_choice: str = "auto"
    max_tokens: int | None = Field(default=4096, ge=1)  # per reply: a runaway generation is cut, not waited for
    timeout_s: float = Field(default=300.0, gt=0)        # the wait for a reply's first byte (prefill)
    idle_timeout_s: float = Field(default=120.0, gt=0)   # a stream silent this long after it began is cut
    max_attempts: int = Field(default=4, ge=1)
    stream: bool = True              # false for servers that cannot stream tool calls
    extra_body: dict[str, Any] = Field(default_factory=dict)
    context_window: int | None = Field(default=None, ge=1024)  # tokens; unset: the server's word, else 32768
    # In-process engine (keel.engine.local): a GGUF path or Hugging Face "repo:file"; set = used.
    local_model: str | None = None
    local_context: int = Field(default=8192, ge=512)   # tokens of KV cache kept across steps
    # "auto" (or unset): the cores other processes leave free (keel/engine/local_cpu.py); a number as given.
    local_threads: Annotated[int, Field(ge=1)] | Literal["auto"] | None = "auto"
    # The static prompt prefix's KV state kept on disk across runs (keel/engine/prefix_cache.py);
    # MiB in all, least recently used evicted first; 0 = off.
    local_prefix_cache_mb: int = Field(default=512, ge=0)
    # llama.cpp's weight repacking and AMX kernels; auto = off where the CPU advertises AMX, whose
    # kernels crash the process on VMs without AMX state (keel/engine/local_cpu.py).
    local_extra_buffers: Literal["auto", "on", "off"] = "auto"
    # Prompt-lookup decoding at temperature 0 (keel/engine/local_draft.py): "rewrite" = change_file's editor
    # requests, whose reply copies the file (1.1-1.3x faster on 2 cores); "all" adds the conversation's steps;
    # "off": llama-cpp-python's own loop (no guesses; the grammar on every candidate, not the argmax first).
    local_lookup: Literal["rewrite", "all", "off"] = "rewrite"
    # In process: a grammar (keel/engine/grammar.py); auto = on. Servers: "on" sends tool_choice "required" with a
    # finish tool (vLLM >= 0.8.3, llama.cpp --jinja; after a 400, never again); auto = off (keel/engine/constrain.py).
    constrain_tool_calls: Literal["auto", "on", "off"] = "auto"
    # The tools and prompt the model sees. small: five tools with only required arguments, a short
    # prompt, the project's files in the first message (keel.tools.small, keel.context.preload);
    # auto: small for the in-process engine, full for servers.
    profile: Literal["auto", "full", "small"] = "auto"


class LimitSettings(_Section):
    max_steps: int = Field(default=50, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    max_pushbacks_without_progress: int = Field(default=3, ge=1)
    max_idle_turns: int = Field(default=6, ge=1)


class PriceSettings(_Section):
    input_per_m: float = Field(default=0.0, ge=0)
    cached_input_per_m: float = Field(default=0.0, ge=0)
    output_per_m: float = Field(default=0.0, ge=0)

    @property
    def known(self) -> bool:
        """Whether any price is set: without one, cost is unknown, not zero."""
        return any(v > 0 for v in self.model_dump().values())


class ShellSettings(_Section):
    timeout_s: float = Field(default=120.0, gt=0)
    output_cap_bytes: int = Field(default=30_000, ge=1)
    # "auto": the strongest tier here; a named tier only that one; "off": rlimits and group kill. User config only.
    sandbox: Literal["auto", "bubblewrap", "landlock", "off"] = "auto"
    network: bool = False
    # host unix socket files commands may still connect to under bubblewrap (by path). User config only.
    allow_sockets: list[str] = Field(default_factory=list)
    # the snapshot before each command that makes its deletions undoable (keel.trace.snapshot); 0 turns it off
    snapshot_max_mb: int = Field(default=512, ge=0)
    snapshot_max_files: int = Field(default=50_000, ge=0)
    # environment variables commands get beyond the allow-list (keel.policy.cmdenv): names, or
    # PREFIX* globs. User config only; never the variable that holds the engine's key.
    env_pass: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*\*?$")]] = Field(
        default_factory=list)


class PermissionSettings(_Section):
    approval: Literal["unattended", "interactive", "auto-edit", "full-auto"] | None = None
    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class PinnedCheckSettings(_Section):
    category: Literal["static", "types", "build", "test", "acceptance"]
    command: str = Field(min_length=1)


class VerifySettings(_Section):
    """The verification gate. ``plan`` pins the checks (inference is skipped); ``accept`` adds
    acceptance commands; the category switches drop inferred checks of that kind."""

    mode: Literal["auto", "off"] = "auto"
    static: bool = True
    types: bool = True
    build: bool = True
    test: bool = True
    accept: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]] = Field(default_factory=list)
    plan: list[PinnedCheckSettings] | None = None
    check_timeout_s: float = Field(default=300.0, gt=0)
    max_repair_rounds: int = Field(default=2, ge=0)
    # change_file's candidates assist (keel.drive.candidates): more rewrites asked when its own fail the checks
    candidates: int = Field(default=2, ge=1, le=8)

    def enabled(self) -> dict[str, bool]:
        return {"static": self.static, "types": self.types, "build": self.build, "test": self.test}

    def add_accept(self, commands: list[str]) -> None:
        """Acceptance commands given for one run are added to the configured ones, never replace them."""
        self.accept = list(dict.fromkeys([*self.accept, *commands]))


class HookEntry(_Section):
    """One command hook (docs/extensions.md). ``source`` is set by the loader, never by a file."""

    matcher: str = ""                # PreToolUse/PostToolUse: a regex on the tool name; "" or "*": all
    command: str = Field(min_length=1)
    timeout: float = Field(default=60.0, gt=0)   # seconds, as in Claude Code's settings
    # False: the hook runs outside the OS sandbox (user config only; a project file cannot say it)
    sandbox: bool = True
    source: Literal["user", "project"] = "user"

    @field_validator("matcher")
    @classmethod
    def _matcher_compiles(cls, value: str) -> str:
        # A typo in a guard hook's pattern would otherwise match nothing and the guard would never run.
        if value not in ("", "*"):
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"matcher {value!r} is not a valid regular expression ({exc})") from exc
        return value


class HookSettings(_Section):
    PreToolUse: list[HookEntry] = Field(default_factory=list)
    PostToolUse: list[HookEntry] = Field(default_factory=list)
    UserPromptSubmit: list[HookEntry] = Field(default_factory=list)
    Stop: list[HookEntry] = Field(default_factory=list)
    SessionStart: list[HookEntry] = Field(default_factory=list)
    PreCompact: list[HookEntry] = Field(default_factory=list)


class ExtensionSettings(_Section):
    """Sub-agents, skills and MCP servers (docs/extensions.md)."""

    subagent_max_steps: int = Field(default=6, ge=1)      # the explorer's own step limit
    skills: bool = True
    mcp: bool = True
    mcp_call_timeout_s: float = Field(default=60.0, gt=0)
    mcp_startup_timeout_s: float = Field(default=30.0, gt=0)
    plugins: bool = True                                  # tools from the keel.tools entry point group


# [context]: compaction and the window budget (the accounting itself is keel.context.budget).
BUDGET_COMPONENTS = ("system_and_tools", "memory", "file_reads", "command_output", "history")


class BudgetShares(BaseModel):
    """Shares of the window per component; they may add up to less than 1 (the rest is slack)."""

    model_config = ConfigDict(extra="forbid")

    system_and_tools: float = Field(default=0.15, ge=0, le=1)
    memory: float = Field(default=0.05, ge=0, le=1)
    file_reads: float = Field(default=0.30, ge=0, le=1)
    command_output: float = Field(default=0.20, ge=0, le=1)
    history: float = Field(default=0.30, ge=0, le=1)

    @model_validator(mode="after")
    def _at_most_whole(self) -> BudgetShares:
        total = sum(getattr(self, c) for c in BUDGET_COMPONENTS)
        if total > 1.0 + 1e-9:
            raise ValueError(f"the shares add up to {total:g}; they may add up to at most 1")
        return self


class ContextSettings(BaseModel):
    """``[context]``: when keel compacts the history and what it keeps."""

    model_config = ConfigDict(extra="forbid")

    compact_at: float = Field(default=0.8, gt=0.1, le=0.95)   # share of the window that triggers compaction
    compact_to: float = Field(default=0.5, gt=0.05, lt=0.9)   # share the history is brought under
    keep_last: int = Field(default=8, ge=2)                   # recent messages kept verbatim
    summarizer: Literal["model", "deterministic"] = "model"   # deterministic: no summarising model call
    max_failed_compactions: int = Field(default=3, ge=1)      # circuit breaker: then stop with limit:context
    # the project overview in the first message (keel.context.overview): at most OVERVIEW_SHARE of the window; 0 = none
    overview_tokens: int = Field(default=1200, ge=0)
    budget: BudgetShares = Field(default_factory=BudgetShares)

    @model_validator(mode="after")
    def _target_below_trigger(self) -> ContextSettings:
        if self.compact_to >= self.compact_at:
            raise ValueError(f"compact_to ({self.compact_to:g}) must be below compact_at ({self.compact_at:g})")
        return self


Switch = bool | Literal["auto"]


class AssistSettings(_Section):
    """``[assists]`` (keel.core.assists): each assist's switch, "auto" (its measured profiles), true or false;
    ``all = false`` turns every one off. The keys are the registry's names (a test keeps them in step)."""

    all: bool = True
    preload: Switch = "auto"
    checks_before: Switch = "auto"
    whole_file_editor: Switch = "auto"
    editor_checks: Switch = "auto"
    python_edit_undo: Switch = "auto"
    expected_values: Switch = "auto"
    test_redirect: Switch = "auto"
    callee_change: Switch = "auto"
    call_trace: Switch = "auto"
    put_back: Switch = "auto"
    rename_spread: Switch = "auto"
    moves: Switch = "auto"
    candidates: Switch = "auto"
    focus: Switch = "auto"
    again: Switch = "auto"
    claim_repair: Switch = "auto"
    variety: Switch = "auto"
    reply_watch: Switch = "auto"
    contract_review: Switch = "auto"
    trial_calls: Switch = "auto"
    spec_probes: Switch = "auto"

    def switches(self) -> dict[str, Switch]:
        return {k: v for k, v in self.model_dump().items() if k != "all"}

    def active(self, profile: str) -> Assists:
        """The assists on for a run of ``profile`` under these switches."""
        return choose(profile, self.switches(), everything=self.all)


class TelemetrySettings(_Section):
    """OpenTelemetry export (keel.trace.telemetry): the OTEL_EXPORTER_OTLP_* variables win over these."""
    endpoint: str | None = None      # an OTLP/HTTP base URL (traces go to ENDPOINT/v1/traces)
    content: bool = False            # prompt, reply and tool text in the spans: opt-in


class Config(_Section):
    engine: EngineSettings = Field(default_factory=EngineSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    prices: PriceSettings = Field(default_factory=PriceSettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    verify: VerifySettings = Field(default_factory=VerifySettings)
    context: ContextSettings = Field(default_factory=ContextSettings)  # keel.context: compaction and budget
    hooks: HookSettings = Field(default_factory=HookSettings)
    extensions: ExtensionSettings = Field(default_factory=ExtensionSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    assists: AssistSettings = Field(default_factory=AssistSettings)   # keel.core.assists


class ConfigError(Exception):
    """Invalid configuration; the message says which file and key."""


# Keys a project file may not set: they redirect requests/keys or loosen permissions.
UNTRUSTED_IN_PROJECT = {("engine", "base_url"), ("engine", "api_key_env"), ("engine", "extra_body"),
                        ("engine", "local_model"),  # a cloned repo must not pick the file llama.cpp parses
                        ("permissions", "allow"), ("permissions", "approval"), ("shell", "sandbox"),
                        ("shell", "network"), ("shell", "allow_sockets"),
                        # the snapshot is what makes a command's deletions undoable: the person sets it
                        ("shell", "snapshot_max_mb"), ("shell", "snapshot_max_files"),
                        ("shell", "env_pass"),   # which of the person's variables commands see
                        ("engine", "local_prefix_cache_mb"),   # disk use in the person's data dir
                        ("telemetry", "endpoint"), ("telemetry", "content")}   # where the run's text may go


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
    except UnicodeDecodeError as e:  # TOML is UTF-8 by definition; say where the bad byte is
        raise ConfigError(f"{path}: not valid UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                          "TOML files are UTF-8") from e
    except OSError as e:  # a directory, or unreadable: a message, not a traceback
        raise ConfigError(f"{path}: cannot read it ({e.strerror or e})") from e


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


def _tag_hooks(layer: dict[str, Any], source: str, warnings: list[str] | None = None) -> None:
    """Mark each hook with the file it came from: project hooks run only in a trusted project, and
    always in the sandbox (``sandbox = false`` is the user's to say)."""
    hooks = layer.get("hooks")
    for entries in (hooks.values() if isinstance(hooks, dict) else []):
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict):
                entry["source"] = source
                if source == "project" and entry.get("sandbox") is False:
                    entry["sandbox"] = True
                    if warnings is not None:
                        warnings.append(f"ignored sandbox = false on the project hook {entry.get('command')!r}: "
                                        "only your user config can run a hook outside the sandbox")


def _validate(data: dict[str, Any], source: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(_describe_error(err) for err in e.errors())
        raise ConfigError(f"{source}: {problems}") from e


def _describe_error(err: Any) -> str:
    """One problem, naming the key and the value; an unknown key gets the close spelling."""
    loc = [str(p) for p in err["loc"]]
    where = ".".join(loc)
    if err["type"] == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
        return f"{where}: unknown key ({hint})"
    if err["type"] in ("missing", "model_type", "model_attributes_type"):
        return f"{where}: {err['msg']}"
    return f"{where}: {err['msg']} (got {err.get('input')!r})"


def _known_keys(loc: list[str]) -> list[str]:
    model: Any = Config
    for part in loc:
        if part.isdigit():  # an item of a list of tables: same model
            continue
        field = getattr(model, "model_fields", {}).get(part)
        model = _section_model(getattr(field, "annotation", None))
        if model is None:
            return []
    return list(model.model_fields)


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside ``Section``, ``list[Section]`` or ``Section | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section_model(arg)
        if found is not None:
            return found
    return None


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
    _tag_hooks(project, "project", warnings)
    _tag_hooks(user, "user")
    merged = _merge(project, user)
    for event in {**project.get("hooks", {}), **user.get("hooks", {})}:  # hooks add up, user's first
        merged["hooks"][event] = list(user.get("hooks", {}).get(event, [])) + \
            list(project.get("hooks", {}).get(event, []))
    # Project rules may tighten (ask/deny) in addition to the user's own.
    for kind in ("ask", "deny"):
        extra = project.get("permissions", {}).get(kind, [])
        if extra and user.get("permissions", {}).get(kind):
            merged["permissions"][kind] = list(user["permissions"][kind]) + list(extra)

    engine = {"base_url": env.get("KEEL_BASE_URL") or env.get("OPENAI_BASE_URL"), "model": env.get("KEEL_MODEL")}
    merged = _merge(merged, {"engine": {k: v for k, v in engine.items() if v}})
    if flags:
        merged = _merge(merged, {s: {k: v for k, v in vals.items() if v is not None}
                                 for s, vals in flags.items()})
    return _validate(merged, "configuration"), warnings


def config_for(workspace: Path, config: Config | None, *, base_url: str | None = None,
               model: str | None = None) -> tuple[Config, list[str]]:
    """The configuration an Agent runs with, and its warnings. No config given: the layers `keel run`
    reads (KEEL_* environment, the user's and the project's config.toml), so the library and the CLI
    agree; a bad file raises keel.config.ConfigError. ``base_url``/``model`` go on top, as flags do;
    a given config is copied before they do, never changed."""
    engine = {"base_url": base_url, "model": model}
    if config is None:
        return load_config(workspace, flags={"engine": engine})
    if base_url is None and model is None:
        return config, []
    return config.model_copy(deep=True, update={"engine": config.engine.model_copy(
        update={k: v for k, v in engine.items() if v is not None})}), []
