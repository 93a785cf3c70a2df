"""Prompt-lookup decoding (keel.engine.local_draft): the guesses (pure), and on the real 0.5B GGUF
that a reply decoded with guesses is the greedy reply, that the KV cache afterwards holds exactly
the tokens llama-cpp-python says it holds (the next step's prefix reuse depends on it), and that a
consumer stopping early leaves it consistent too. The model part skips, saying why, when
KEEL_SMOKE_MODEL is unset or llama-cpp-python is missing (like tests/test_local_smoke.py)."""

from __future__ import annotations

import pytest
from conftest import smoke_model

from keel.engine.local_cpu import model_params, read_cpuinfo, use_extra_buffers
from keel.engine.local_draft import DraftStats, draft, lookup_tokens


@pytest.mark.parametrize(("history", "expected"), [
    # the last two tokens (5, 6) occurred before: what followed them is the guess
    ([1, 5, 6, 7, 8, 9, 2, 5, 6], [7, 8, 9, 2, 5]),
    # the longest suffix that occurs wins over a later, shorter match: (4, 5, 6) → 10, not (5, 6) → 20
    ([4, 5, 6, 10, 11, 5, 6, 20, 21, 4, 5, 6], [10, 11, 5, 6, 20]),
    # the latest occurrence of the same suffix: in a rewrite, the copy being made is the nearest
    ([5, 6, 1, 1, 5, 6, 2, 2, 5, 6], [2, 2, 5, 6]),
    ([1, 2, 3, 4], []),                  # nothing repeats
    ([7, 7], []),                        # a one-token match is not enough (MIN_NGRAM)
    ([], []), ([3], []),
])
def test_draft_guesses_what_followed_the_latest_longest_match(history: list[int], expected: list[int]) -> None:
    assert draft(history, max_draft=5) == expected


def test_draft_is_capped_and_never_reads_past_the_history() -> None:
    history = list(range(50)) + [10, 11]
    assert draft(history, max_draft=3) == [12, 13, 14]
    assert draft([1, 2, 9, 1, 2], max_draft=10) == [9, 1, 2]


def _llm():   # noqa: ANN202 - a llama_cpp.Llama
    model = smoke_model()   # first: it skips, saying why, where llama-cpp-python is not installed
    import llama_cpp

    # as keel's engine builds it: on a CPU advertising AMX (a VM that cannot run its kernels),
    # llama.cpp's repacking buffers off, or the first decode crashes (keel/engine/local_cpu.py)
    extra = use_extra_buffers("auto", read_cpuinfo())
    with model_params(llama_cpp, extra):
        return llama_cpp.Llama(model_path=str(model), n_ctx=2048, n_threads=2, verbose=False)


SOURCE = '''def area(width, height):
    """The area of a rectangle."""
    return width * height


def perimeter(width, height):
    return 2 * (width + height)
'''
PROMPT = (f"<|im_start|>user\nRepeat this file exactly, in one code block:\n```python\n{SOURCE}```<|im_end|>\n"
          "<|im_start|>assistant\n")


def _greedy(llm, prompt: list[int], n: int) -> list[int]:   # noqa: ANN001
    out = []
    for token in llm.generate(prompt, temp=0.0, repeat_penalty=1.0):
        if llm.token_eos() == token or len(out) == n:
            break
        out.append(token)
    return out


def _looked_up(llm, prompt: list[int], n: int, stats: DraftStats) -> list[int]:   # noqa: ANN001
    """The reply's tokens, the end-of-text token included when the reply ended by itself."""
    llm.reset()
    llm.eval(prompt[:-1])
    tokens = lookup_tokens(llm, prompt, llm._init_sampler(temp=0.0, repeat_penalty=1.0), stats)
    out = []
    try:
        for token in tokens:
            out.append(token)
            if llm.token_eos() == token or len(out) == n:
                break
    finally:
        tokens.close()
    return out


def test_a_reply_with_guesses_is_the_greedy_reply_and_the_cache_holds_what_it_says() -> None:
    """The cache holds every token but the last one taken (llama-cpp-python's own convention)."""
    llm = _llm()
    prompt = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    plain = _greedy(llm, prompt, 120)
    stats = DraftStats()
    looked = _looked_up(llm, prompt, 121, stats)
    text = llm.detokenize(looked).decode("utf-8", "replace")
    assert "return width * height" in text            # the model did copy the file
    # the same reply (llama.cpp's sums may differ in their last bits with the batch's shape; on
    # this copy the tokens are the same), made with guesses most of which were kept
    assert looked[:len(plain)] == plain and len(looked) == len(plain) + (looked[-1] == llm.token_eos())
    assert stats.accepted > stats.guessed / 2 and stats.batches < len(looked)
    # the cache: every token but the last one taken, in order, and nothing after it
    assert llm.n_tokens == len(prompt) + len(looked) - 1
    assert list(llm.input_ids[: llm.n_tokens]) == prompt + looked[:-1]
    # so the next request that extends this one evaluates only its new tokens, and continues right
    follow = _greedy(llm, prompt + looked, 5)
    assert llm.n_tokens >= len(prompt) + len(looked)   # the cached part was kept, not read again
    llm.reset()
    assert follow == _greedy(llm, prompt + looked, 5)


def test_a_sampled_reply_with_guesses_is_the_one_plain_sampling_draws_with_that_seed() -> None:
    """change_file's candidates are sampled (keel.engine.types.variant_sampling): with guesses, each
    position is still sampled once and in order, so the same seed draws the same reply."""
    from keel.engine.local_draft import sampled_tokens

    llm = _llm()
    prompt = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    replies = []
    for seed in (1, 2):
        llm.set_seed(seed)
        plain = []
        for token in llm.generate(prompt, temp=0.7, repeat_penalty=1.0):
            if llm.token_eos() == token or len(plain) == 120:
                break
            plain.append(token)
        llm.reset()
        llm.eval(prompt[:-1])
        llm.set_seed(seed)
        stats, looked = DraftStats(), []
        tokens = sampled_tokens(llm, prompt, 0.7, stats)
        for token in tokens:
            if llm.token_eos() == token or len(looked) == 120:
                break
            looked.append(token)
        tokens.close()
        assert looked == plain and stats.accepted > stats.guessed / 2, seed
        replies.append(llm.detokenize(looked))
        llm.reset()
    assert b"return width * height" in replies[0]


def test_a_consumer_that_stops_early_leaves_the_cache_consistent() -> None:
    llm = _llm()
    prompt = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    stats = DraftStats()
    first = _looked_up(llm, prompt, 17, stats)          # stops in the middle of a batch of guesses
    assert len(first) == 17 and stats.accepted > 0
    assert llm.n_tokens == len(prompt) + 16
    assert list(llm.input_ids[: llm.n_tokens]) == prompt + first[:-1]
    llm.reset()
    assert _greedy(llm, prompt, 17) == first


TOOLS = [
    {"type": "function", "function": {"name": "change_file", "description": "Change a file by saying what must change.",
                                      "parameters": {"type": "object", "required": ["path", "change"], "properties": {
                                          "path": {"type": "string"}, "change": {"type": "string", "maxLength": 300}}}}},
    {"type": "function", "function": {"name": "finish", "description": "End the task.", "parameters": {
        "type": "object", "required": ["summary"], "properties": {"summary": {"type": "string", "maxLength": 240}}}}},
]
TASK = ("<|im_start|>system\nYou are a coding agent. Reply with one tool call: change_file or finish.<|im_end|>\n"
        "<|im_start|>user\nThe add() function in calc.py returns a - b instead of a + b. Fix it.\n"
        "=== calc.py ===\ndef add(a, b):\n    return a - b\n=== end ===<|im_end|>\n<|im_start|>assistant\n")


def test_the_grammar_checked_last_gives_the_grammar_constrained_greedy_reply() -> None:
    smoke_model()   # skips without llama-cpp-python or the model, before llama_cpp is imported
    from llama_cpp import LlamaGrammar

    from keel.engine.grammar import tool_call_grammar
    from keel.engine.local_draft import GrammarLast, no_guess

    llm = _llm()
    grammar = LlamaGrammar.from_string(tool_call_grammar(TOOLS, require_call=True), verbose=False)
    prompt = llm.tokenize(TASK.encode(), add_bos=False, special=True)
    # the prompt evaluated in the same two batches as below (all but its last token, then that one):
    # llama.cpp's sums differ in their last bits with a batch's shape, enough to flip a near tie
    llm.reset()
    llm.eval(prompt[:-1])
    chained = []
    for token in llm.generate(prompt, temp=0.0, repeat_penalty=1.0, grammar=grammar):   # every candidate checked
        if llm.token_eos() == token or len(chained) == 80:
            break
        chained.append(token)
    llm.reset()
    llm.eval(prompt[:-1])
    sampler = GrammarLast(llm, grammar)
    tokens = lookup_tokens(llm, prompt, sampler, DraftStats(), no_guess)
    last = []
    for token in tokens:
        if llm.token_eos() == token or len(last) == 80:
            break
        last.append(token)
    tokens.close()
    sampler.close()
    assert last == chained
    assert '"name": "change_file"' in llm.detokenize(last).decode() or '"name": "finish"' in llm.detokenize(last).decode()


def test_each_prompt_token_is_evaluated_once_per_step_also_with_a_watcher() -> None:
    """A watcher (on_delta) makes the engine read the prompt in chunks first; the decoding loop then
    starts where that stopped. Measured before this test: every step of a real run read its prompt
    twice, which halved what a second thread and the prefix cache gained."""
    from keel.engine.local import LocalEngine

    engine = LocalEngine(smoke_model(), n_ctx=2048, n_threads=2)
    read: list[int] = []
    evaluate = engine._llm.eval
    engine._llm.eval = lambda tokens: (read.append(len(tokens)), evaluate(tokens))[1]   # a spy: counts, then reads
    messages = [{"role": "user", "content": "Repeat this file exactly, in one code block:\n" + SOURCE}]
    for step in range(2):
        read.clear()
        turn = engine.complete(messages, [], on_delta=lambda delta: None)
        assert turn.content
        uncached = turn.usage.prompt_tokens - turn.usage.cached_tokens
        assert sum(read) == uncached - 1, step   # the last prompt token goes with the first decoded one
        messages += [{"role": "assistant", "content": turn.content}, {"role": "user", "content": "Thanks."}]
    engine.close()
