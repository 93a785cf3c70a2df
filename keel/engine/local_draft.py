"""Prompt-lookup decoding for the in-process engine: guess the next tokens from the text already
in the window, check the guesses in one batch, keep the ones the model would have produced.

Why: change_file's editor request rewrites a file it was given, so most of its reply is a copy of
the prompt. On this CPU a 1.5B model generates ~12 tokens/s one at a time but reads ~45 tokens/s
in a batch: a copied run of eight tokens checked in one batch costs about what two generated
tokens do. At temperature 0 the result is the reply greedy decoding gives (each kept token is the
argmax at its position, the grammar applied), up to llama.cpp's sums differing in their last bits
with the batch's shape.

``draft`` is the pure core (which tokens to guess); ``lookup_tokens`` is the shell over
llama-cpp-python's context (decode a batch, sample each position, drop the rejected cells). It is
llama.cpp's "prompt lookup"/n-gram speculation, written on the batch API because
llama-cpp-python's own ``draft_model`` turns on logits for every token of the context (~10 GB for
a 151k vocabulary at 8k context).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_NGRAM = 4        # the longest suffix looked up; longer matches predict better
MIN_NGRAM = 2        # a one-token match guessed wrong more often than right (measured below)
MAX_DRAFT = 3       # tokens guessed at once; a batch of 11 costs ~2.5 generated tokens here
SEARCH_BACK = 16384  # tokens of history searched; the whole window at the default context


def draft(history: Sequence[int], max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM,
          max_draft: int = MAX_DRAFT) -> list[int]:
    """The tokens that followed the latest earlier occurrence of the history's last n tokens
    (the longest n from max_ngram down to min_ngram that occurs), at most ``max_draft``; [] when
    none occurs. The latest occurrence: in a rewrite, the copy being made is usually the nearest."""
    size = len(history)
    start = max(0, size - SEARCH_BACK)
    for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
        tail = list(history[size - n:])
        first = tail[0]
        # the occurrence must end before the tail itself and leave at least one token after it
        for at in range(size - n - 1, start - 1, -1):
            if history[at] == first and list(history[at:at + n]) == tail:
                follow = list(history[at + n:min(size, at + n + max_draft)])
                if follow:
                    return follow
    return []


def no_guess(_history: Sequence[int]) -> list[int]:
    """For a request decoded without guesses: one token per batch, as plain decoding."""
    return []


@dataclass
class DraftStats:
    """How the guesses fared in one reply: for the model_call event and the bench."""

    batches: int = 0      # batches decoded (each with or without a guess)
    guessed: int = 0      # tokens guessed
    accepted: int = 0     # guesses the model agreed with
    sizes: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, int]:
        return {"batches": self.batches, "guessed": self.guessed, "accepted": self.accepted}


def lookup_tokens(llm: Any, prompt: Sequence[int], sampler: Any, stats: DraftStats,
                  guess: Callable[[Sequence[int]], list[int]] = draft) -> Generator[int, None, None]:
    """Yield the reply's tokens after ``prompt``, whose all but last token ``llm`` has evaluated.

    Each round decodes the pending token plus the guesses in one batch with logits at every
    position, samples position by position (the sampler accepts each token it returns, so a
    grammar advances as in plain decoding), and stops at the first position where the sample is
    not the guess. The KV cells past what was kept are removed, so ``llm.n_tokens`` and
    ``llm.input_ids`` always describe the cache, also when the consumer stops early (close())."""
    history = list(prompt)
    pending = history[-1]
    n_past = len(history) - 1
    room = llm.n_ctx() - 1
    try:
        while n_past < room:
            guesses = guess(history)[: max(0, min(room - n_past - 1, llm.n_batch - 1))]
            batch = [pending, *guesses]
            llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
            llm._ctx.decode(llm._batch)
            llm.input_ids[n_past:n_past + len(batch)] = batch
            llm.n_tokens = n_past + len(batch)
            llm._requires_eval = False
            stats.batches += 1
            stats.guessed += len(guesses)
            for i in range(len(batch)):
                token = sampler.sample(llm._ctx, i)
                history.append(token)
                # the cache keeps the pending token and the guesses before i, all confirmed
                kept = n_past + 1 + i
                agreed = i < len(guesses) and token == guesses[i]
                if not agreed:
                    truncate(llm, kept)
                yield token
                if not agreed:
                    n_past, pending = kept, token
                    break
                stats.accepted += 1
    finally:
        truncate(llm, min(llm.n_tokens, len(history) - 1))


def greedy_tokens(llm: Any, prompt: Sequence[int], grammar: Any, stats: DraftStats | None) -> Generator[int, None, None]:
    """A greedy reply's tokens after ``prompt`` (all but its last token evaluated): under ``grammar``
    (GrammarLast) when one is given, with guesses (``draft``) when ``stats`` is given to count them."""
    sampler = (GrammarLast(llm, grammar) if grammar is not None
               else llm._init_sampler(temp=0.0, repeat_penalty=1.0))
    try:
        yield from lookup_tokens(llm, prompt, sampler, stats or DraftStats(), draft if stats is not None else no_guess)
    finally:
        if isinstance(sampler, GrammarLast):
            sampler.close()


def sampled_tokens(llm: Any, prompt: Sequence[int], temperature: float,
                   stats: DraftStats | None) -> Generator[int, None, None]:
    """A sampled reply's tokens after ``prompt`` (all but its last token evaluated), with guesses when
    ``stats`` is given: llama-cpp-python's sampler as ``generate`` makes it (its top-k, top-p and
    min-p; the seed set on ``llm`` before), each position sampled once, in order, so a guess is kept
    exactly when the sample is that token and the reply is the one plain sampling draws. Why: change_file's
    candidates are sampled rewrites of a file they mostly copy (keel.drive.candidates); without guesses
    each took ~30 s for ~500 tokens on the 1.5B here."""
    sampler = llm._init_sampler(temp=temperature, repeat_penalty=1.0)
    yield from lookup_tokens(llm, prompt, sampler, stats or DraftStats(), draft if stats is not None else no_guess)


class GrammarLast:
    """Greedy decoding under a grammar, the grammar checked on the argmax token alone first; the
    whole vocabulary goes through it only when it refuses that token (llama.cpp's common sampler
    does the same). Why: llama_sampler_sample applies the grammar to all 151,936 candidates of every
    token, where a tool call's next token is nearly always the argmax already. The result is the
    same token: the argmax when the grammar allows it, else the best token the grammar allows.
    The grammar's state advances with each token returned (``sample`` accepts it)."""

    def __init__(self, llm: Any, grammar: Any) -> None:
        import ctypes

        import llama_cpp
        from llama_cpp._internals import LlamaTokenDataArray

        self._lc, self._ct = llama_cpp, ctypes
        self._n_vocab = llm.n_vocab()
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False)
        self._all = LlamaTokenDataArray(n_vocab=self._n_vocab)
        self.full_checks = 0   # tokens the argmax was refused for (the slow path)

    def sample(self, ctx: Any, idx: int) -> int:
        import numpy as np

        lc = self._lc
        logits = np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        if not self._allows(token, float(logits[token])):
            self.full_checks += 1
            self._all.copy_logits(logits)
            lc.llama_sampler_apply(self._grammar, self._ct.byref(self._all.candidates))
            token = int(np.argmax(self._all.candidates_data.logit))
        lc.llama_sampler_accept(self._grammar, token)
        return token

    def _allows(self, token: int, logit: float) -> bool:
        one: Any = self._one[0]   # a llama_token_data (ctypes converts the Python numbers)
        one.id, one.logit, one.p = token, logit, 0.0
        self._one_array.size, self._one_array.selected, self._one_array.sorted = 1, -1, False
        self._lc.llama_sampler_apply(self._grammar, self._ct.byref(self._one_array))
        return bool(self._one[0].logit != float("-inf"))

    def close(self) -> None:
        if self._grammar is not None:
            self._lc.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        self.close()


def truncate(llm: Any, n: int) -> None:
    """Drop the KV cells from position ``n`` on, so the cache holds exactly ``n`` tokens."""
    if llm.n_tokens > n:
        llm._ctx.kv_cache_seq_rm(-1, n, -1)
        llm.n_tokens = n
