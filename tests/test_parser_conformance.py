"""Conformance of keel's text tool-call recovery with the engines' own parser tests.

The cases in tests/fixtures/parsers/ are ported, as data, from the public parser tests of vLLM
(qwen3_coder, qwen3_xml, hermes), SGLang (Qwen3-Coder detector) and llama.cpp (Hermes 2 Pro,
Qwen3-Coder XML); each file names its source repository, path and commit. Every case is judged
the way its source test judges (calls only, calls and content, content contains ...). Cases
that test streaming internals or engine APIs are kept with the reason they do not apply.

keel must match at least 95% of the applicable cases, and every case it does not match must be a
difference documented in docs/parsers.md (listed below): a new difference fails this test, and
so does a listed one that is no longer a difference (then the list and the doc are out of date).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.engine.recovery import recover_text_tool_calls

FIXTURES = Path(__file__).parent / "fixtures" / "parsers"
DOC = Path(__file__).parent.parent / "docs" / "parsers.md"
REQUIRED_RATE = 0.95

# Deliberate differences, each explained in docs/parsers.md under the same id.
KNOWN_DIFFERENCES = {
    "llamacpp_hermes_2_pro:object_after_prose",
    "llamacpp_qwen3_coder_xml:big_integer",
    "llamacpp_qwen3_coder_xml:mixed_content",
}


def _load() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    cases = []
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for case in data["cases"]:
            cases.append((f"{path.stem}:{case['id']}", data, case))
    return cases


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # malformed arguments stay raw text


def judge(data: dict[str, Any], case: dict[str, Any], recover: Callable[..., Any]) -> str | None:
    """None when keel's recovery agrees with the peer's expectation, else what differs."""
    tools = case.get("tools", data["tools"])
    try:
        rest, calls, _fmt = recover(case["output"], set(tools), schemas=tools)
    except Exception as exc:  # noqa: BLE001 - a crash is a difference like any other
        return f"raised {exc!r}"
    got = [(c.name, _arguments(c.arguments)) for c in calls]
    want = [(c["name"], c["arguments"]) for c in case["calls"]]
    kind = case["calls_judge"]
    if kind == "exact" and got != want:
        return f"calls {got!r} != {want!r}"
    if kind == "exact_text" and [(c.name, c.arguments) for c in calls] != [(n, json.dumps(a)) for n, a in want]:
        return f"calls {[(c.name, c.arguments) for c in calls]!r} != {want!r}"
    if kind == "names" and [n for n, _ in got] != [n for n, _ in want]:
        return f"call names {[n for n, _ in got]!r} != {[n for n, _ in want]!r}"
    expected = case.get("content", "")
    mode = case["content_judge"]
    if mode == "exact" and rest != expected:
        return f"content {rest!r} != {expected!r}"
    if mode == "stripped" and rest.strip() != expected.strip():
        return f"content {rest.strip()!r} != {expected.strip()!r}"
    if mode == "contains" and not all(part in rest for part in case["contains"]):
        return f"content {rest!r} lacks {case['contains']!r}"
    return None


def conformance(recover: Callable[..., Any] = recover_text_tool_calls) -> tuple[int, int, dict[str, str]]:
    """(ported, applicable, {case key: difference}) over all fixture files."""
    cases = _load()
    applicable = [(key, data, case) for key, data, case in cases if "not_applicable" not in case]
    differences = {key: diff for key, data, case in applicable if (diff := judge(data, case, recover))}
    return len(cases), len(applicable), differences


def test_every_source_is_cited_and_every_case_is_judged_or_explained():
    for path in FIXTURES.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        source = data["source"]
        assert source["repo"] and source["path"] and len(source["commit"]) == 40, path.name
        for case in data["cases"]:
            assert "not_applicable" in case or "output" in case, (path.name, case["id"])


def test_conformance_rate_and_documented_differences(capsys):
    ported, applicable, differences = conformance()
    matching = applicable - len(differences)
    with capsys.disabled():
        print(f"\nparser conformance: {matching}/{applicable} applicable cases match "
              f"({matching / applicable:.1%}); {ported} ported, {ported - applicable} not applicable")
        for key, diff in sorted(differences.items()):
            print(f"  differs: {key}: {diff}")
    assert matching / applicable >= REQUIRED_RATE
    assert set(differences) == KNOWN_DIFFERENCES, "update docs/parsers.md and KNOWN_DIFFERENCES together"
    doc = DOC.read_text(encoding="utf-8")
    for key in KNOWN_DIFFERENCES:
        assert f"`{key}`" in doc, f"{key} is not explained in docs/parsers.md"
