"""`keel log SESSION` shows the context events as sentences, not as their raw JSON (which for a
compaction holds the whole record)."""

from __future__ import annotations

from keel.cli.log import event_line

T0 = 1000.0


def test_context_events_read_as_sentences():
    compaction = {"type": "compaction", "ts": T0 + 2, "step": 3, "trigger": "threshold", "ok": True,
                  "tokens_before": 26000, "tokens_after": 9000, "folded": {"messages": 12},
                  "summarizer": "model", "record": "## Task\n" + "x" * 5000}
    line = event_line(compaction, T0)
    assert line.endswith("compact  threshold: 26,000 → 9,000 tokens, 12 message(s) folded, summary by the model")
    assert "## Task" not in line
    failed = {"type": "compaction", "ts": T0, "step": 4, "trigger": "circuit_breaker", "ok": False,
              "error": "3 compactions failed in a row"}
    assert "compact  FAILED (circuit_breaker): 3 compactions failed in a row" in event_line(failed, T0)
    cache = {"type": "cache_break", "ts": T0, "step": 4, "index": 2, "cause": "compaction", "prefix_reuse": 0.66}
    assert "cache    prefix broken at message 2 by compaction, 66% reused" in event_line(cache, T0)
    window = {"type": "context_window", "ts": T0, "tokens": 8192, "source": "server:max_model_len",
              "reply_cap": 2048, "prompt_limit": 6144}
    assert "window   8,192 tokens (server:max_model_len), replies ≤ 2,048, prompts ≤ 6,144" in event_line(window, T0)
