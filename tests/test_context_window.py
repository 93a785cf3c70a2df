"""The context window: config first, then the server's /v1/models (vLLM), /props (llama.cpp) or
/api/show (Ollama) over real HTTP on 127.0.0.1, then the default; the reply cap; config errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from keel.config import Config, ConfigError, load_config
from keel.context.manager import build_context_manager
from keel.context.window import (
    DEFAULT_CONTEXT_WINDOW,
    Window,
    discover_window,
    model_entry,
    resolve_window,
    trained_window,
    window_from_entry,
    window_from_ollama,
    window_from_props,
)
from keel.core.events import EventBus
from keel.engine.client import OpenAICompatEngine

VLLM_MODELS = {"object": "list", "data": [{"id": "Qwen/Qwen3-Coder-30B", "object": "model", "owned_by": "vllm",
                                           "max_model_len": 32768}]}
LLAMACPP_MODELS = {"object": "list", "data": [{"id": "qwen.gguf", "object": "model", "owned_by": "llamacpp",
                                               "meta": {"n_ctx_train": 262144, "n_params": 30_000_000_000}}]}
LLAMACPP_PROPS = {"default_generation_settings": {"n_ctx": 16384}, "total_slots": 1}
OLLAMA_MODELS = {"object": "list", "data": [{"id": "qwen3-coder", "object": "model", "owned_by": "library"}]}
OLLAMA_SHOW = {"parameters": "num_ctx 12288\nstop \"<|im_end|>\"", "model_info": {"qwen3.context_length": 262144}}


@pytest.mark.parametrize(("entry", "expected"), [
    (VLLM_MODELS["data"][0], Window(32768, "server:max_model_len")),
    ({"id": "m", "context_length": 131072}, Window(131072, "server:context_length")),
    ({"id": "m", "max_model_len": 0}, None),
    ({"id": "m", "max_model_len": "32768"}, None),
    (LLAMACPP_MODELS["data"][0], None),
    (None, None),
])
def test_window_from_a_models_entry(entry, expected):
    assert window_from_entry(entry) == expected


def test_parsers_for_llamacpp_and_ollama():
    assert trained_window(LLAMACPP_MODELS["data"][0]) == Window(262144, "server:meta.n_ctx_train")
    assert window_from_props(LLAMACPP_PROPS) == Window(16384, "server:props.n_ctx")
    assert window_from_props({"n_ctx": 4096}) == Window(4096, "server:props.n_ctx")
    assert window_from_props({"total_slots": 1}) is None
    assert window_from_ollama(OLLAMA_SHOW) == Window(12288, "server:ollama num_ctx")
    # no num_ctx set: Ollama serves its default, never more than the model takes
    assert window_from_ollama({"model_info": {"llama.context_length": 131072}}) == \
        Window(4096, "server:ollama default num_ctx")
    assert window_from_ollama({"model_info": {"tiny.context_length": 2048}}) == \
        Window(2048, "server:ollama default num_ctx")
    assert window_from_ollama({"license": "x"}) is None


def test_model_entry_picks_the_named_model_or_the_only_one():
    two = {"data": [{"id": "a", "max_model_len": 1}, {"id": "b", "max_model_len": 2}]}
    assert model_entry(two, "b") == {"id": "b", "max_model_len": 2}
    assert model_entry(two, "c") is None
    assert model_entry(VLLM_MODELS, "other-name") == VLLM_MODELS["data"][0]
    assert model_entry({"error": "x"}, "a") is None


class _Server:
    """A tiny real HTTP server on 127.0.0.1 answering GET/POST paths with canned JSON."""

    def __init__(self, routes: dict[str, object]) -> None:
        self.seen: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                owner.seen.append(f"{self.command} {self.path}")
                body = routes.get(f"{self.command} {self.path}")
                data = json.dumps(body).encode() if body is not None else b'{"error": "no"}'
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(("routes", "model", "expected"), [
    ({"GET /v1/models": VLLM_MODELS}, "Qwen/Qwen3-Coder-30B", Window(32768, "server:max_model_len")),
    ({"GET /v1/models": LLAMACPP_MODELS, "GET /props": LLAMACPP_PROPS}, "qwen.gguf",
     Window(16384, "server:props.n_ctx")),
    ({"GET /v1/models": LLAMACPP_MODELS}, "qwen.gguf", Window(262144, "server:meta.n_ctx_train")),
    ({"GET /v1/models": OLLAMA_MODELS, "POST /api/show": OLLAMA_SHOW}, "qwen3-coder",
     Window(12288, "server:ollama num_ctx")),
    ({"GET /v1/models": {"data": [{"id": "scripted", "owned_by": "keel"}]}}, "scripted", None),
    ({}, "anything", None),
])
def test_discover_window_over_http(routes, model, expected):
    server = _Server(routes)
    try:
        assert discover_window(server.base_url, model) == expected
    finally:
        server.close()


def test_resolve_window_order_config_then_server_then_default():
    server = _Server({"GET /v1/models": VLLM_MODELS})
    try:
        assert resolve_window(8192, server.base_url, "m") == Window(8192, "config")
        assert resolve_window(None, server.base_url, "m") == Window(32768, "server:max_model_len")
        assert server.seen == ["GET /v1/models"]  # the configured window asked nothing
    finally:
        server.close()
    assert resolve_window(None, None, None) == Window(DEFAULT_CONTEXT_WINDOW, "default")
    assert resolve_window(None, "http://127.0.0.1:9/v1", "m").source == "default"  # nobody listening


@pytest.mark.parametrize(("window", "max_tokens", "reply_cap"), [
    (32768, 4096, 4096),   # a roomy window keeps the configured reply cap
    (8192, 4096, 2048),    # a small one: at most a quarter of it, and the engine is told
    (8192, None, 2048),
])
def test_reply_cap_is_at_most_a_quarter_of_the_window(window, max_tokens, reply_cap):
    config = Config.model_validate({"engine": {"context_window": window, "model": "m"}})
    engine = OpenAICompatEngine("http://127.0.0.1:9/v1", "m", max_tokens=max_tokens)
    manager = build_context_manager(config, engine, EventBus("t"))
    assert manager.reply_cap == reply_cap and manager.prompt_limit == window - reply_cap
    assert engine.max_tokens == (reply_cap if max_tokens else None)


@pytest.mark.parametrize(("text", "problem"), [
    ("[engine]\ncontext_window = 512\n", "engine.context_window"),
    ("[context]\ncompact_at = 0.99\n", "context.compact_at"),
    ("[context]\ncompact_at = 0.5\ncompact_to = 0.6\n", "compact_to (0.6) must be below compact_at (0.5)"),
    ("[context.budget]\nhistory = 0.9\nfile_reads = 0.5\n", "they may add up to at most 1"),
    ("[context]\nkeep_lats = 4\n", "did you mean 'keep_last'"),
    ("[context]\nsummarizer = \"llm\"\n", "context.summarizer"),
])
def test_bad_context_config_stops_with_a_clear_message(tmp_path, text, problem):
    user = tmp_path / "config.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path, user_path=user, env={})
    assert problem in str(err.value)


def test_context_window_flag_reaches_the_config(tmp_path):
    config, _ = load_config(tmp_path, user_path=tmp_path / "none.toml", env={},
                            flags={"engine": {"context_window": 16384}})
    assert config.engine.context_window == 16384
    assert (config.context.compact_at, config.context.keep_last) == (0.8, 8)


def test_an_in_process_engine_states_its_own_window():
    class InProcess:  # what keel.engine.local.LocalEngine exposes
        model = "local.gguf"
        context_window = 8192
        max_tokens = 1024

    config = Config.model_validate({})
    manager = build_context_manager(config, InProcess(), EventBus("t"))
    assert manager.window == Window(8192, "engine") and manager.reply_cap == 1024
    pinned = build_context_manager(Config.model_validate({"engine": {"context_window": 4096}}), InProcess(),
                                   EventBus("t"))
    assert pinned.window == Window(4096, "config")  # the user's word wins
