"""Start the real server on a free port of 127.0.0.1 for each test module, and talk HTTP to it."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self, base):
        self.base = base

    def request(self, method, path, payload=None):
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, json.loads(raw) if raw else None


@pytest.fixture(scope="module")
def api():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "notes.server", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = Client(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 20
    while True:
        try:
            if client.request("GET", "/health")[0] == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the server did not start: {proc.stdout.read()}")
        time.sleep(0.05)
    yield client
    proc.terminate()
    proc.wait(timeout=10)
