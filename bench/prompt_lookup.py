"""Prompt-lookup decoding on change_file's editor request, on and off, in one run (issue 24).

    python bench/prompt_lookup.py --model ~/.local/share/keel/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --cases py-off-by-one,py-mutable-default,py-config-key --rounds 1

For each case of ``evals/``, the editor request keel would send for the case's file to change
(keel.drive.change.change_request: the tests shown, the file, the failing test output, the task)
is answered by one in-process engine (warmed by one request) at temperature 0 with ``lookup``
off and on, each going first in turn (``--variant N``: sampled as change_file's candidate N is, at
keel.engine.types.VARIANT_TEMPERATURE with a seed of its own, the same for both),
the KV cache cleared before each so both read the whole prompt. Prints per request: prompt
tokens, time to the first token, generation time, tokens/s, the guesses kept, and whether the two
replies are the same text; then the generation-time ratio off/on per case and in all.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from keel.context.preload import FileText  # noqa: E402
from keel.drive.change import change_request  # noqa: E402
from keel.engine.local import LocalEngine  # noqa: E402
from keel.eval.cases import load_case, materialize  # noqa: E402


def editor_request(case_id: str) -> list[dict]:
    case = load_case(ROOT / "evals" / case_id)
    with tempfile.TemporaryDirectory() as tmp:
        ws = materialize(case, Path(tmp) / "ws")
        target = case.acceptance.must_change[0]
        tests = [p for p in case.acceptance.must_not_change if (ws / p).is_file()]
        out = subprocess.run(case.acceptance.commands[0], shell=True, cwd=ws, capture_output=True, text=True, timeout=120)
        failures = (out.stdout + out.stderr)[-1500:]
        related = [FileText(p, (ws / p).read_text()) for p in tests]
        return change_request(case.task, None, target, (ws / target).read_text(), related, failures)


def one(engine: LocalEngine, messages: list[dict], lookup: str, variant: int = 0) -> dict:
    engine.lookup = lookup
    engine._llm.reset()
    engine._saved = None
    started = time.monotonic()
    turn = engine.complete(messages, [], variant=variant) if variant else engine.complete(messages, [])
    total = time.monotonic() - started
    gen = total - engine.prompt_eval_s
    n = turn.usage.completion_tokens
    return {"lookup": lookup, "prompt": turn.usage.prompt_tokens, "first_token_s": round(engine.prompt_eval_s, 2),
            "gen_s": round(gen, 2), "tokens": n, "tok_s": round(n / gen, 1) if gen > 0 else None,
            "guesses": engine.last_lookup, "text": turn.content}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--cases", default="py-off-by-one,py-mutable-default,py-config-key")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--variant", type=int, default=0, help="sample as candidate N does (0: greedy)")
    args = p.parse_args()
    engine = LocalEngine(args.model, n_threads=args.threads)
    engine.complete([{"role": "user", "content": "Say hello."}], [])   # the first request of a process is slower
    ratios = []
    for case_id in [c for c in args.cases.split(",") if c]:
        messages = editor_request(case_id)
        gen = {"off": [], "rewrite": []}
        for round_ in range(args.rounds):
            modes = ("off", "rewrite") if round_ % 2 == 0 else ("rewrite", "off")   # each goes first in turn
            rows = [one(engine, messages, mode, args.variant + round_ // 2) for mode in modes]
            same = rows[0]["text"] == rows[1]["text"]
            for r in rows:
                gen[r["lookup"]].append(r["gen_s"])
                print(case_id, {k: v for k, v in r.items() if k != "text"}, "same reply" if same else "REPLY DIFFERS",
                      flush=True)
        ratio = statistics.median(gen["off"]) / max(0.01, statistics.median(gen["rewrite"]))
        ratios.append(ratio)
        print(f"{case_id}: generation off/on = {ratio:.2f}x", flush=True)
    print(f"all: median generation speed-up {statistics.median(ratios):.2f}x over {len(ratios)} cases")
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
