"""The in-process engine's side of the prefix cache (keel.engine.prefix_cache): which tokens of the
first prompt are static, and moving their KV state between llama.cpp and the cache file.

The static prefix is what every run's first prompt shares: the template's head, the system
prompt and the tool schemas, up to where the first user message's text begins. It is found by
rendering the system messages with an empty user message and taking the tokens that rendering
shares with the real prompt, so whatever the chat template puts there is included as it is.

Only sequence 0 is moved (``llama_state_seq_get_data``/``set_data``), not ``Llama.save_state()``:
that one also copies the logits buffer (n_batch x n_vocab floats, 300 MB for Qwen2.5), while the
KV cells of 1,150 tokens of the 1.5B model are 33 MB.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from keel.engine.prefix_cache import MIN_PREFIX_TOKENS, CacheKey, PrefixCache, model_digest, token_digest

log = logging.getLogger(__name__)


def static_prefix_len(render: Callable[[list[dict[str, Any]], list[dict[str, Any]]], str],
                      tokenize: Callable[[str], list[int]], messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]], prompt: Sequence[int]) -> int:
    """How many leading tokens of ``prompt`` come before the first user message's text (never the
    prompt's last token, which llama-cpp-python always evaluates again)."""
    first = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    head = tokenize(render([*messages[:first], {"role": "user", "content": ""}], tools))
    shared = next((i for i, (a, b) in enumerate(zip(head, prompt, strict=False)) if a != b),
                  min(len(head), len(prompt)))
    return min(shared, len(prompt) - 1)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


class DiskPrefix:
    """The prefix cache of one model file and context size."""

    def __init__(self, cache: PrefixCache, model_path: Path, n_ctx: int, llama_cpp: Any) -> None:
        self.cache = cache
        self._llama_cpp = llama_cpp
        self._base = (model_digest(model_path), n_ctx, _version("keel"),
                      str(getattr(llama_cpp, "__version__", "unknown")))
        self.restored = 0          # prefix tokens restored from disk (0: none)
        self.restore_s = 0.0
        self.saved = 0             # prefix tokens written to disk by this process
        self.save_s = 0.0

    def key(self, tokens: Sequence[int]) -> CacheKey:
        model, n_ctx, keel, llama = self._base
        return CacheKey(model=model, prefix=token_digest(tokens), n_ctx=n_ctx, keel=keel, llama_cpp=llama)

    def restore(self, llm: Any, tokens: Sequence[int]) -> bool:
        """Load the stored state of ``tokens`` into ``llm``'s empty context; True when it is there."""
        if len(tokens) < MIN_PREFIX_TOKENS or llm.n_tokens:
            return False
        started = time.monotonic()
        key = self.key(tokens)
        found = self.cache.load(key)
        if found is None:
            return False
        stored, state = found
        if list(stored) != list(tokens):   # a digest collision would be astonishing; be exact anyway
            return False
        low = self._llama_cpp
        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if low.llama_state_seq_set_data(llm._ctx.ctx, buf, len(state), 0) != len(state):
            log.debug("prefix cache: llama.cpp refused the stored state; removing it")
            llm._ctx.kv_cache_seq_rm(-1, 0, -1)
            self.cache.discard(key)
            return False
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        if hasattr(llm, "_requires_eval"):
            llm._requires_eval = True      # the logits are not restored: sample only after an eval
        self.restored, self.restore_s = len(tokens), time.monotonic() - started
        return True

    def store(self, llm: Any, tokens: Sequence[int]) -> bool:
        """Save ``llm``'s KV state, which must hold exactly ``tokens``, under their key."""
        if len(tokens) < MIN_PREFIX_TOKENS or llm.n_tokens != len(tokens):
            return False
        started = time.monotonic()
        low = self._llama_cpp
        size = int(low.llama_state_seq_get_size(llm._ctx.ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        written = int(low.llama_state_seq_get_data(llm._ctx.ctx, buf, size, 0))
        if not 0 < written <= size:
            return False
        ok = self.cache.save(self.key(tokens), tokens, bytes(buf)[:written])
        if ok:
            self.saved, self.save_s = len(tokens), time.monotonic() - started
        return ok
