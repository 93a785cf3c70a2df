"""The context window: from the config, else from the server, else a documented default.

Order: ``[engine] context_window`` / ``--context-window N``; then what the server publishes —
vLLM's ``max_model_len`` in ``/v1/models`` (SGLang and others use ``context_length`` and similar),
llama.cpp's served ``n_ctx`` from ``/props`` (else the model's ``meta.n_ctx_train`` in
``/v1/models``, which the server may have been started below), Ollama's ``num_ctx`` from
``/api/show`` (else Ollama's default of 4096, capped by the model's own ``context_length``); then
``DEFAULT_CONTEXT_WINDOW``. An engine that later says a request did not fit teaches keel a smaller
window (keel.context.manager). The parsers are pure; ``discover_window`` does the HTTP.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

DEFAULT_CONTEXT_WINDOW = 32768
OLLAMA_DEFAULT_NUM_CTX = 4096
MODEL_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")
TIMEOUT_S = 2.0
MAX_BODY = 1 << 20


@dataclass(frozen=True)
class Window:
    tokens: int
    source: str   # "config", "default", or the server field it came from


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def model_entry(payload: Any, model: str | None) -> dict[str, Any] | None:
    """The ``/v1/models`` entry for ``model`` (or the only one listed)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    for entry in entries:
        if entry.get("id") == model:
            return entry
    return entries[0] if len(entries) == 1 else None


def window_from_entry(entry: dict[str, Any] | None) -> Window | None:
    """vLLM / SGLang style fields of a ``/v1/models`` entry."""
    if entry is None:
        return None
    for key in MODEL_KEYS:
        if (value := _positive(entry.get(key))) is not None:
            return Window(value, f"server:{key}")
    return None


def trained_window(entry: dict[str, Any] | None) -> Window | None:
    """llama.cpp's ``meta.n_ctx_train``: the most the model can take, not what is served."""
    meta = entry.get("meta") if entry is not None else None
    value = _positive(meta.get("n_ctx_train")) if isinstance(meta, dict) else None
    return Window(value, "server:meta.n_ctx_train") if value is not None else None


def window_from_props(payload: Any) -> Window | None:
    """llama.cpp ``/props``: the context each slot is served with."""
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    value = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    value = value or _positive(payload.get("n_ctx"))
    return Window(value, "server:props.n_ctx") if value is not None else None


def window_from_ollama(payload: Any) -> Window | None:
    """Ollama ``/api/show``: ``num_ctx`` from the model's parameters, else Ollama's default."""
    if not isinstance(payload, dict):
        return None
    for line in str(payload.get("parameters") or "").splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return Window(int(value.strip()), "server:ollama num_ctx")
    info = payload.get("model_info")
    trained = [v for k, v in info.items() if k.endswith(".context_length") and _positive(v)] \
        if isinstance(info, dict) else []
    if not trained and "model_info" not in payload:
        return None
    served = min([OLLAMA_DEFAULT_NUM_CTX, *trained])
    return Window(served, "server:ollama default num_ctx")


def discover_window(base_url: str, model: str | None, headers: dict[str, str] | None = None,
                    timeout: float = TIMEOUT_S) -> Window | None:
    """Ask the server; None when it does not say (or does not answer quickly)."""
    headers = dict(headers or {})
    base = base_url.rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    entry = model_entry(_request("GET", f"{base}/models", headers, timeout), model)
    found = window_from_entry(entry)
    if found is not None:
        return found
    if entry is not None and isinstance(entry.get("meta"), dict):  # llama.cpp
        return window_from_props(_request("GET", f"{root}/props", headers, timeout)) or trained_window(entry)
    owner = str((entry or {}).get("owned_by") or "").lower()
    if owner in ("library", "ollama") and model:
        return window_from_ollama(_request("POST", f"{root}/api/show", headers, timeout, {"model": model}))
    return None


def resolve_window(configured: int | None, base_url: str | None, model: str | None,
                   headers: dict[str, str] | None = None) -> Window:
    if configured is not None:
        return Window(configured, "config")
    if base_url:
        found = discover_window(base_url, model, headers)
        if found is not None:
            return found
    return Window(DEFAULT_CONTEXT_WINDOW, "default")


def _request(method: str, url: str, headers: dict[str, str], timeout: float, body: Any = None) -> Any:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    try:
        conn.request(method, parts.path or "/", body=data,
                     headers={**headers, **({"Content-Type": "application/json"} if data else {})})
        response = conn.getresponse()
        if response.status != 200:
            return None
        return json.loads(response.read(MAX_BODY))
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
