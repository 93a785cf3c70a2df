"""Streaming speed: a large tool call through keel's client vs a raw HTTP read of the same stream.

The scripted engine runs in its own process on 127.0.0.1 and streams a write_file call whose
arguments are 1 MB and 5 MB, split into vLLM-sized pieces (8 characters per delta, so ~650 000
SSE events for 5 MB). "raw" reads the response body with http.client and does nothing with it;
"keel" is OpenAICompatEngine.complete with the event bus a real run has (text renderer attached),
so SSE parsing, call assembly and per-delta events are all counted. The server's own time to
produce the stream is in both numbers.

Target: keel / raw ≤ 2.0 for each size.

Run: python bench/stream.py [--sizes 1,5] [--repeat 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from keel.cli.render import TextRenderer  # noqa: E402
from keel.core.events import EventBus  # noqa: E402
from keel.engine.client import OpenAICompatEngine  # noqa: E402

MESSAGES = [{"role": "system", "content": "You write files."}, {"role": "user", "content": "write big.txt"}]
TOOLS = [{"type": "function", "function": {"name": "write_file", "description": "Write a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"]}}}]


def script_line(megabytes: int) -> str:
    line = "abcdefghij" * 7 + "\n"  # 71 bytes: ordinary source-like text with newlines to escape
    content = line * (megabytes * 1_000_000 // len(line))
    return json.dumps({"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": content}}]})


def raw_read(base_url: str) -> tuple[float, int]:
    url = urlsplit(base_url)
    body = json.dumps({"model": "scripted", "messages": MESSAGES, "tools": TOOLS, "stream": True,
                       "stream_options": {"include_usage": True}})
    started = time.perf_counter()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    conn.request("POST", f"{url.path}/chat/completions", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    total = 0
    while chunk := response.read(1 << 16):
        total += len(chunk)
    conn.close()
    return time.perf_counter() - started, total


def keel_read(base_url: str, expected_chars: int) -> float:
    engine = OpenAICompatEngine(base_url, "scripted", timeout_s=600, max_attempts=1)
    with open(os.devnull, "w") as devnull:
        bus = EventBus("bench", [TextRenderer(out=devnull, err=devnull)])
        started = time.perf_counter()
        turn = engine.complete(MESSAGES, TOOLS, lambda d: bus.emit("assistant_delta", step=1, kind=d.kind,
                                                                    text=d.text))
        elapsed = time.perf_counter() - started
    arguments = turn.tool_calls[0].arguments
    assert len(arguments) >= expected_chars, (len(arguments), expected_chars)
    json.loads(arguments)  # assembled intact
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,5", help="tool-call sizes in MB, comma separated")
    parser.add_argument("--repeat", type=int, default=2, help="runs per size; the best is reported")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.jsonl"
        with script.open("w") as fh:
            for mb in sizes:
                line = script_line(mb)
                for _ in range(args.repeat * 2):  # one raw and one keel read per repetition
                    fh.write(line + "\n")
        server = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "scripted-engine", str(script)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            worst = 0.0
            print(f"{'size':>6} {'raw s':>8} {'keel s':>8} {'keel/raw':>9}  stream bytes")
            for mb in sizes:
                raws, keels, nbytes = [], [], 0
                for _ in range(args.repeat):
                    raw_s, nbytes = raw_read(base_url)
                    raws.append(raw_s)
                    keels.append(keel_read(base_url, mb * 900_000))
                ratio = min(keels) / min(raws)
                worst = max(worst, ratio)
                print(f"{mb:>4} MB {min(raws):8.2f} {min(keels):8.2f} {ratio:9.2f}  {nbytes:,}")
            print(f"target keel/raw <= 2.0: {'met' if worst <= 2.0 else 'NOT met'} (worst {worst:.2f})")
        finally:
            server.terminate()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
