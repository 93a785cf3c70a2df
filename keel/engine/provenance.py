"""What served a run: the server's identity and version where it says, the model, for a GGUF its file
digest, quantization and chat template digest, the context window, the sampling parameters keel sends
and keel's own version. The same model through two servers (another chat template, tool parser or
context size) can give opposite results; this record is what tells two runs' setups apart.

Asked of the server once per session, each question bounded by PROBE_TIMEOUT_S, none required: a
server answers what it knows (``/v1/models``; llama.cpp ``/props``; vLLM ``/version``; Ollama
``/api/version`` and ``/api/show``; a FastAPI server such as llama-cpp-python's its ``/openapi.json``
title and version). These queries are GETs (and Ollama's show POST) apart from the chat request path.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

PROBE_TIMEOUT_S = 1.5
# llama.cpp's llama_ftype numbers, as GGUF's general.file_type records them.
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
              17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 24: "IQ1_S", 25: "IQ4_NL",
              26: "IQ3_S", 28: "IQ4_XS", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0"}


def keel_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("keel")
    except PackageNotFoundError:
        return "0+unknown"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path, cache_dir: Path | None = None) -> str:
    """The sha256 of a whole file, remembered by path, size and mtime (a GGUF is read once, not per run)."""
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    cache = (cache_dir / "file-digests.json") if cache_dir else None
    known: dict[str, str] = {}
    if cache is not None and cache.is_file():
        try:
            known = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    digest = h.hexdigest()
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({**known, key: digest}), encoding="utf-8")
        except OSError:
            pass
    return digest


def gguf_facts(path: Path, metadata: dict[str, Any], cache_dir: Path | None) -> dict[str, Any]:
    """A GGUF's digest, quantization, chat template digest and trained context from its metadata."""
    facts: dict[str, Any] = {"model_file": path.name, "gguf_sha256": file_sha256(path, cache_dir)}
    file_type = metadata.get("general.file_type")
    if file_type is not None and str(file_type).isdigit():
        facts["quantization"] = FILE_TYPES.get(int(file_type), f"file_type {file_type}")
    if template := metadata.get("tokenizer.chat_template"):
        facts["chat_template_sha256"] = sha256_text(str(template))
    arch = metadata.get("general.architecture")
    if arch and str(metadata.get(f"{arch}.context_length", "")).isdigit():
        facts["context_train"] = int(metadata[f"{arch}.context_length"])
    if name := metadata.get("general.name"):
        facts["model_name"] = str(name)
    return facts


# ---- asking a server ---------------------------------------------------------------------------


def _root(base_url: str) -> str:
    """The server's root: the base URL without a trailing /v1 (llama.cpp, vLLM, Ollama serve there)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _get(url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310 - the engine URL
            if response.status != 200:
                return None
            return json.loads(response.read(2_000_000))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def probe_server(base_url: str, model: str, api_key: str | None = None) -> dict[str, Any]:
    """What the server at ``base_url`` says about itself and ``model``; {} when it says nothing."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = _root(base_url)
    facts: dict[str, Any] = {}
    listed = _get(base_url.rstrip("/") + "/models", headers)
    entries = [m for m in (listed or {}).get("data") or [] if isinstance(m, dict)]
    if entries:
        facts["served_models"] = [str(m.get("id")) for m in entries][:20]
        mine = next((m for m in entries if m.get("id") == model), entries[0] if len(entries) == 1 else None)
        if mine:
            facts["model_id"] = mine.get("id")
            facts["owned_by"] = mine.get("owned_by")
            if mine.get("max_model_len"):   # vLLM
                facts["context_window"] = int(mine["max_model_len"])
            meta: dict[str, Any] = mine["meta"] if isinstance(mine.get("meta"), dict) else {}
            if meta.get("n_ctx_train"):     # llama.cpp
                facts["context_train"] = int(meta["n_ctx_train"])
    facts.update(_identify(root, model, headers))
    return {k: v for k, v in facts.items() if v not in (None, "", [])}


def _identify(root: str, model: str, headers: dict[str, str]) -> dict[str, Any]:
    if isinstance(props := _get(root + "/props", headers), dict) and (
            "default_generation_settings" in props or "build_info" in props):
        settings = props.get("default_generation_settings") or {}
        out: dict[str, Any] = {"server": "llama.cpp", "server_version": props.get("build_info")}
        n_ctx = settings.get("n_ctx") or props.get("n_ctx")
        if n_ctx:
            out["context_window"] = int(n_ctx)
        if props.get("chat_template"):
            out["chat_template_sha256"] = sha256_text(str(props["chat_template"]))
        if props.get("model_path"):
            out["model_file"] = Path(str(props["model_path"])).name
        return out
    if isinstance(version := _get(root + "/version", headers), dict) and version.get("version"):
        return {"server": "vllm", "server_version": str(version["version"])}
    if isinstance(ollama := _get(root + "/api/version", headers), dict) and ollama.get("version"):
        return {"server": "ollama", "server_version": str(ollama["version"]), **_ollama_model(root, model, headers)}
    if isinstance(api := _get(root + "/openapi.json", headers), dict) and isinstance(api.get("info"), dict):
        title = str(api["info"].get("title") or "")
        name = "llama-cpp-python" if "llama" in title.lower() else title
        return {"server": name, "server_version": str(api["info"].get("version") or "")}
    return {}


def _ollama_model(root: str, model: str, headers: dict[str, str]) -> dict[str, Any]:
    shown = _get(root + "/api/show", headers, {"model": model})
    if not isinstance(shown, dict):
        return {}
    details = shown.get("details") or {}
    info = shown.get("model_info") or {}
    arch = info.get("general.architecture")
    out = {"quantization": details.get("quantization_level"), "model_format": details.get("format"),
           "parameter_size": details.get("parameter_size")}
    if shown.get("template"):
        out["chat_template_sha256"] = sha256_text(str(shown["template"]))
    if arch and info.get(f"{arch}.context_length"):
        out["context_train"] = int(info[f"{arch}.context_length"])
    return out


# ---- the record ----------------------------------------------------------------------------------


def public_url(url: str) -> str:
    """The URL without credentials or query (what is safe to log)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def sampling(engine: Any) -> dict[str, Any]:
    """The sampling parameters keel sends (extra_body by name only: it may hold anything)."""
    out = {k: getattr(engine, k) for k in ("temperature", "seed", "max_tokens", "tool_choice", "stream")
           if hasattr(engine, k)}
    if getattr(engine, "extra_body", None):
        out["extra_body_keys"] = sorted(engine.extra_body)
    return out


def engine_serving(engine: Any, cache_dir: Path | None = None) -> dict[str, Any]:
    """The serving facts of a keel engine: an OpenAI-compatible server (asked), a GGUF in process (its
    file and metadata), or another engine (its kind and model)."""
    if isinstance(getattr(engine, "base_url", None), str):
        facts = {"engine": "http", "base_url": public_url(engine.base_url), "model": engine.model,
                 "sampling": sampling(engine),
                 **probe_server(engine.base_url, engine.model, getattr(engine, "_api_key", None))}
        facts.setdefault("server", "openai-compatible")
        return facts
    llm = getattr(engine, "_llm", None)
    if llm is not None and isinstance(getattr(engine, "path", None), Path):
        import llama_cpp

        return {"engine": "local", "server": "llama-cpp-python", "server_version": llama_cpp.__version__,
                "model": engine.model, "context_window": int(llm.n_ctx()), "chat_format": llm.chat_format,
                "sampling": sampling(engine), **gguf_facts(engine.path, dict(llm.metadata or {}), cache_dir)}
    return {"engine": type(engine).__name__, "model": getattr(engine, "model", None), "sampling": sampling(engine)}


class Provenance:
    """The serving record of one agent: asked once, then the tool-call formats its replies used."""

    def __init__(self, engine: Any, cache_dir: Path | None = None) -> None:
        self.engine = engine
        self.cache_dir = cache_dir
        self._record: dict[str, Any] | None = None
        self.formats: Counter[str] = Counter()

    def record(self) -> dict[str, Any]:
        if self._record is None:
            facts = engine_serving(self.engine, self.cache_dir)
            self._record = {"keel_version": keel_version(), **{k: v for k, v in facts.items() if v is not None}}
        return self._record

    def observe(self, event: dict[str, Any]) -> None:
        """Event bus sink: which tool-call format each model call's reply was in."""
        if event.get("type") == "model_call" and event.get("tool_calls"):
            self.formats[str(event.get("tool_call_format") or "structured")] += 1

    def summary(self) -> dict[str, Any]:
        """The record with the tool-call formats seen so far (for the result)."""
        return {**self.record(), "tool_call_formats": dict(self.formats)}


def serving_line(serving: dict[str, Any] | None) -> str:
    """One line for people: server and version, model, quantization, digests, window, sampling, keel."""
    if not serving:
        return "not recorded (a session from before keel recorded its serving)"
    s = serving
    sampling = s.get("sampling") or {}
    parts = [f"{s.get('server') or s.get('engine')} {s.get('server_version') or ''}".strip(),
             f"model {s.get('model_id') or s.get('model')}", s.get("quantization"),
             f"gguf sha256 {s['gguf_sha256'][:12]}" if s.get("gguf_sha256") else None,
             f"template {s['chat_template_sha256'][:12]}" if s.get("chat_template_sha256") else None,
             f"context {s['context_window']}" if s.get("context_window") else None,
             " ".join(f"{k} {v}" for k, v in sampling.items() if k in ("temperature", "seed", "max_tokens")),
             ", ".join(f"{k} ×{n}" for k, n in (s.get("tool_call_formats") or {}).items()) or None,
             f"keel {s.get('keel_version')}"]
    return " · ".join(p for p in parts if p)


# The fields two runs' setups must share to be compared (keel eval compare): what changes answers.
SETUP_FIELDS = ("engine", "server", "server_version", "model", "model_id", "gguf_sha256", "quantization",
                "chat_template_sha256", "context_window", "sampling", "keel_version")


def setup_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """``field: A -> B`` for each setup field the two records disagree on (missing records: none)."""
    if not a or not b:
        return []
    return [f"{key}: {a.get(key)!r} -> {b.get(key)!r}" for key in SETUP_FIELDS if a.get(key) != b.get(key)]
