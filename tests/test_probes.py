"""The examples and edge rules of a comment the task makes the spec, run by the gate (keel/verify/probes.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import call, make_repo

from keel.testing.server import ScriptedEngineServer
from keel.verify.contract import rules
from keel.verify.probes import probe_command, probes, signature

CHUNK_DOC = ("Split `items` into arrays of `size` elements; the last one may be shorter. chunk([1, 2, 3], 2) -> "
             "[[1, 2], [3]]. `size` must be a positive integer (RangeError otherwise). The input array is not modified.")


def labels(name: str, doc: str, params: list[str], required: int) -> list[str]:
    return [p.label for p in probes(name, doc, params, required, rules(doc))]


def test_an_example_and_the_values_its_rule_refuses_are_probes() -> None:
    # js-implement-function's comment: the hidden check tried chunk([1], 1.5)
    assert labels("chunk", CHUNK_DOC, ["items", "size"], 2) == [
        "chunk([1, 2, 3], 2) -> [[1, 2], [3]]", "chunk([1, 2, 3], 0) raises RangeError",
        "chunk([1, 2, 3], -1) raises RangeError", "chunk([1, 2, 3], 1.5) raises RangeError"]


@pytest.mark.parametrize("name, doc, params, required, expected", [
    ("double", "Twice n: >>> double(2) 4 >>> double(-3) -6", ["n"], 1, ["double(2) -> 4", "double(-3) -> -6"]),
    ("format_duration", 'The shortest form: 5400 -> "1h30m", 0 -> "0s".', ["seconds"], 1,
     ['format_duration(5400) -> "1h30m"', 'format_duration(0) -> "0s"']),
    ("human", '0 -> "0s", 61 -> "1m 1s"', ["seconds", "maxParts"], 1, ['human(0) -> "0s"', 'human(61) -> "1m 1s"']),
    ("pair", '1 -> "a"', ["a", "b"], 2, []),                      # two parameters: `1 -> "a"` is not a call
    ("groupBy", 'groupBy(["ab", "c"], (s) => s.length) -> { 2: ["ab"], 1: ["c"] }', ["items", "keyOf"], 2,
     ['groupBy(["ab", "c"], (s) => s.length) -> { 2: ["ab"], 1: ["c"] }']),
    # a rule without a named error, or not about a parameter, or not requiring the edge: no edge probe
    ("f", "f(2) -> 4. n must be positive.", ["n"], 1, ["f(2) -> 4"]),
    ("f", "f(2) -> 4. Raises ValueError if n is positive.", ["n"], 1, ["f(2) -> 4"]),
    ("f", "f(2) -> 4. Returns a positive count; n must not be None (TypeError otherwise).", ["n"], 1, ["f(2) -> 4"]),
    ("f", "f(2) -> 4. A negative n raises ValueError.", ["n"], 1, ["f(2) -> 4", "f(-1) raises ValueError"]),
    ("f", "Twice n. A negative n raises ValueError.", ["n"], 1, []),   # no example call to vary
    ("f", "f([1, 2) -> oops", ["n"], 1, []),                        # unbalanced: not read
])
def test_the_probes_a_comment_gives(name: str, doc: str, params: list[str], required: int,
                                    expected: list[str]) -> None:
    assert labels(name, doc, params, required) == expected


@pytest.mark.parametrize("path, text, expected", [
    ("m.py", "def f(a, b=1, *rest):\n    pass\n", (["a", "b"], 1)),
    ("m.py", "class C:\n    def f(self, a):\n        pass\n", None),          # a method: no module-level f
    ("c.js", "function chunk(items, size) {\n}\n", (["items", "size"], 2)),
    ("c.js", "const human = (seconds, maxParts = 4) => seconds;\n", (["seconds", "maxParts"], 1)),
    ("c.js", "function f({ a, b }) {}\n", None),                              # destructured
])
def test_signatures(path: str, text: str, expected: tuple[list[str], int] | None) -> None:
    assert signature(path, text, path == "c.js" and "chunk" in text and "chunk" or
                     ("human" if "human" in text else "f")) == expected


WRONG_CHUNK = """function chunk(items, size) {
  if (size <= 0) throw new RangeError("size must be a positive integer");
  const out = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
module.exports = { chunk };
"""
RIGHT_CHUNK = WRONG_CHUNK.replace("if (size <= 0)", "if (!Number.isInteger(size) || size <= 0)")


def run_probes(tmp_path: Path, path: str, text: str, doc: str, name: str) -> subprocess.CompletedProcess[str]:
    sig = signature(path, text, name)
    assert sig is not None
    command = probe_command(path, text, [(name, p) for p in probes(name, doc, sig[0], sig[1], rules(doc))])
    assert command is not None
    (tmp_path / path).write_text(text)
    return subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_node_runs_the_probes_and_names_the_one_that_fails(tmp_path: Path) -> None:
    wrong = run_probes(tmp_path, "collections.js", WRONG_CHUNK, CHUNK_DOC, "chunk")
    assert wrong.returncode == 1
    assert "FAILED: chunk([1, 2, 3], 1.5) raises RangeError: returned [[1],[2,3]] instead of throwing" in wrong.stdout
    assert "ok: chunk([1, 2, 3], 0) raises RangeError" in wrong.stdout
    right = run_probes(tmp_path, "collections.js", RIGHT_CHUNK, CHUNK_DOC, "chunk")
    assert right.returncode == 0 and "FAILED" not in right.stdout and right.stdout.count("ok: ") == 4


def test_a_probe_that_is_not_code_is_skipped_not_failed(tmp_path: Path) -> None:
    doc = "chunk([1, 2, 3], 2) -> [[1, 2], [3]]. chunk([1], 2) -> [[1]] or [1 2]. chunk(a b, 1) -> x."
    ran = run_probes(tmp_path, "collections.js", RIGHT_CHUNK, doc, "chunk")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "skipped: chunk(a b, 1) -> x" in ran.stdout and "ok: chunk([1], 2) -> [[1]]" in ran.stdout


def test_python_probes_run_against_the_module(tmp_path: Path) -> None:
    doc = "Twice n: double(2) -> 4. A negative n raises ValueError."
    loose = run_probes(tmp_path, "mathx.py", "def double(n):\n    return 2 * n\n", doc, "double")
    assert loose.returncode == 1 and "FAILED: double(-1) raises ValueError: returned -2 instead of raising" in loose.stdout
    strict = run_probes(tmp_path, "mathx.py", "def double(n):\n    if n < 0:\n        raise ValueError(n)\n"
                        "    return 2 * n\n", doc, "double")
    assert strict.returncode == 0 and strict.stdout.splitlines() == ["ok: double(2) -> 4", "ok: double(-1) raises ValueError"]


def test_an_es_module_or_an_unexported_function_gets_no_probe_command() -> None:
    found = [("chunk", p) for p in probes("chunk", CHUNK_DOC, ["items", "size"], 2, rules(CHUNK_DOC))]
    assert probe_command("c.mjs", "export function chunk(items, size) {}\n", found) is None
    assert probe_command("c.js", "function chunk(items, size) {}\nmodule.exports = { other };\n", found) is None
    double = [("double", p) for p in probes("double", "double(2) -> 4", ["n"], 1, ())]
    assert probe_command("my-lib/m.py", "", double) is None             # not an importable module name
    assert probe_command("a';import os;'.py", "", double) is None
    assert probe_command("pkg/m.py", "", double) is not None


# ---- in a run: the real CLI over the scripted server, the checks in the real sandbox ----------------------
DOUBLE = 'def double(n):\n    """Twice n: double(2) -> 4. A negative n raises ValueError."""\n    raise NotImplementedError\n'
TEST_DOUBLE = "from mathx import double\n\n\ndef test_double():\n    assert double(2) == 4\n"


def test_the_gate_runs_the_comment_and_a_claim_it_refutes_is_not_complete(tmp_path: Path, run_keel) -> None:
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    loose = call("edit_file", path="mathx.py", old_text="    raise NotImplementedError", new_text="    return 2 * n")
    strict = call("edit_file", path="mathx.py", old_text="    return 2 * n",
                  new_text="    if n < 0:\n        raise ValueError(n)\n    return 2 * n")
    script = [{"tool_calls": [loose]}, {"tool_calls": [call("finish", summary="double() doubles")]},
              {"tool_calls": [strict]}, {"tool_calls": [call("finish", summary="and refuses a negative n")]},
              {"tool_calls": [call("finish", summary="checked against the docstring")]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "Implement double() in mathx.py as its docstring says.", "--cwd", str(repo),
                     "--base-url", server.base_url, "--model", "scripted", "--output-format", "json", timeout=120)
        requests = server.requests
    assert r.code == 0, r.stdout + r.stderr
    refused = requests[2]["messages"][-1]["content"]
    assert "the comments' examples and rules for double in mathx.py" in refused
    assert "FAILED: double(-1) raises ValueError: returned -2 instead of raising" in refused
    assert r.result["stop_reason"] == "complete"
    gates = [e for e in r.events() if e["type"] == "verification"]
    assert [g["status"] for g in gates][:2] == ["failed", "passed"]
