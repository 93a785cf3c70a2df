"""A real OTLP backend for the telemetry tests: Arize Phoenix, started on 127.0.0.1 from its own venv.

Phoenix takes OTLP/HTTP traces and answers what it stored through its REST API
(``GET /v1/projects/default/spans``). It lives in a venv of its own (its web stack pins versions
keel's other extras need), named by KEEL_PHOENIX_PYTHON; .ci/run makes it. Without it the tests skip
and say so, unless KEEL_REQUIRE_PHOENIX=1 (CI), where a missing backend is a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT_S = 180.0


def phoenix_python() -> str:
    python = os.environ.get("KEEL_PHOENIX_PYTHON", "")
    if python and Path(python).is_file():
        return python
    message = ("Arize Phoenix is not installed: make a venv with `pip install arize-phoenix` and set "
               "KEEL_PHOENIX_PYTHON to its python (.ci/run does)")
    if os.environ.get("KEEL_REQUIRE_PHOENIX") == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Phoenix:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_PORT": str(self.port), "PHOENIX_GRPC_PORT": str(free_port()),
               "PHOENIX_TELEMETRY_ENABLED": "false"}   # Phoenix's own usage reporting: no traffic out
        self.log = (workdir / "phoenix.log").open("w")
        self.proc = subprocess.Popen([phoenix_python(), "-m", "phoenix.server.main", "serve"], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail(f"Phoenix did not start: {(workdir / 'phoenix.log').read_text()[-2000:]}")
            time.sleep(0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def spans(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = ""
        while True:
            query = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            with urllib.request.urlopen(self.url + "/v1/projects/default/spans" + query, timeout=10) as r:
                page = json.loads(r.read())
            out += page["data"]
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return out

    def trace_of(self, session_id: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The spans of the run whose root span carries ``session_id``, once the root has arrived."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            roots = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == session_id
                     and s["parent_id"] is None]
            if roots and any(s["attributes"].get("keel.stop.reason") for s in roots):
                trace_id = roots[0]["context"]["trace_id"]
                return [s for s in spans if s["context"]["trace_id"] == trace_id]
            if time.monotonic() > deadline:
                raise AssertionError(f"no trace of {session_id} stored after {timeout} s ({len(spans)} spans)")
            time.sleep(0.5)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
