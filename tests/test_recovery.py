"""Text-form tool call recovery and retry backoff: pure functions, tested as tables."""

from __future__ import annotations

import json
import random

import pytest

from keel.engine.recovery import looks_like_tool_call, recover_text_tool_calls
from keel.engine.retry import MAX_RETRY_AFTER_S, backoff_delay, parse_retry_after

TOOLS = {"read_file", "write_file", "grep", "run_shell", "finish"}


def _calls(content: str, tools: set[str] = TOOLS, **kw):
    rest, calls, fmt = recover_text_tool_calls(content, tools, **kw)
    return rest, [(c.name, _maybe_json(c.arguments)) for c in calls], fmt


def _maybe_json(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # malformed arguments stay raw text


# (case id, model output, expected calls [(name, args)], expected format, expected remaining content)
CASES = [
    ("hermes_single",
     '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
     [("read_file", {"path": "a.py"})], "hermes", ""),
    ("hermes_prose_before_after",
     'Let me look at the file.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "src/x.py"}}\n'
     '</tool_call>\nThen I will fix it.',
     # text after the last call was written before its result: dropped
     [("read_file", {"path": "src/x.py"})], "hermes", "Let me look at the file."),
    ("hermes_two_calls",
     '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>\n'
     '<tool_call>{"name": "grep", "arguments": {"pattern": "def main"}}</tool_call>',
     [("read_file", {"path": "a.py"}), ("grep", {"pattern": "def main"})], "hermes", ""),
    ("hermes_arguments_as_json_string",
     '<tool_call>{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}</tool_call>',
     [("read_file", {"path": "a.py"})], "hermes", ""),
    ("hermes_missing_close_at_end",
     'Reading.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n',
     [("read_file", {"path": "a.py"})], "hermes", "Reading."),
    ("hermes_missing_close_before_next_open",
     '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}\n'
     '<tool_call>{"name": "read_file", "arguments": {"path": "b.py"}}</tool_call>',
     [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})], "hermes", ""),
    ("hermes_braces_inside_strings",
     '<tool_call>{"name": "write_file", "arguments": {"path": "m.py", '
     '"content": "def f():\\n    return {\\"a\\": \\"}{\\"}\\n"}}</tool_call>',
     [("write_file", {"path": "m.py", "content": 'def f():\n    return {"a": "}{"}\n'})], "hermes", ""),
    ("hermes_nested_arguments",
     '<tool_call>{"name": "run_shell", "arguments": {"command": "pytest -q", "env": {"A": {"B": [1, 2]}}}}'
     '</tool_call>',
     [("run_shell", {"command": "pytest -q", "env": {"A": {"B": [1, 2]}}})], "hermes", ""),
    ("hermes_parameters_key",
     '<tool_call>{"name": "grep", "parameters": {"pattern": "TODO"}}</tool_call>',
     [("grep", {"pattern": "TODO"})], "hermes", ""),
    ("hermes_no_arguments",
     '<tool_call>{"name": "finish"}</tool_call>', [("finish", {})], "hermes", ""),
    ("hermes_unknown_name_kept",
     '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
     [("delete_everything", {})], "hermes", ""),
    ("hermes_malformed_trailing_comma_raw",
     '<tool_call>{"name": "read_file", "arguments": {"path": "a.py",}}</tool_call>',
     [("read_file", '{"path": "a.py",}')], "hermes", ""),
    ("hermes_unescaped_quotes_read_whole",   # keel.engine.recovery_json.requote
     '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", "content": "x = "1""}}\n</tool_call>',
     [("write_file", {"path": "a.py", "content": 'x = "1"'})], "hermes", ""),
    ("hermes_malformed_unescaped_quote_raw",   # a quote that looks like an end, and the rest is no JSON
     '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", "content": "f("a", "b")"}}\n</tool_call>',
     [("write_file", '{"path": "a.py", "content": "f("a", "b")"}')], "hermes", ""),
    ("hermes_fenced_inside_tag",
     '<tool_call>\n```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```\n</tool_call>',
     [("read_file", {"path": "a.py"})], "hermes", ""),
    ("qwen3_coder_single",
     '<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n</function>\n</tool_call>',
     [("read_file", {"path": "src/app.py"})], "qwen3_coder", ""),
    ("qwen3_coder_multiline_value_keeps_inner_newlines",
     "I'll write the file.\n<tool_call>\n<function=write_file>\n<parameter=path>\nm.py\n</parameter>\n"
     "<parameter=content>\n\ndef f():\n    return 1\n\n</parameter>\n</function>\n</tool_call>",
     [("write_file", {"path": "m.py", "content": "\ndef f():\n    return 1\n"})], "qwen3_coder",
     "I'll write the file."),
    ("qwen3_coder_json_typed_values",
     '<tool_call><function=grep><parameter=pattern>x</parameter><parameter=max_results>20</parameter>'
     '<parameter=globs>["*.py"]</parameter><parameter=ignore_case>true</parameter></function></tool_call>',
     [("grep", {"pattern": "x", "max_results": 20, "globs": ["*.py"], "ignore_case": True})],
     "qwen3_coder", ""),
    ("qwen3_coder_two_functions_in_one_wrapper",
     "<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n</function>\n"
     "<function=read_file>\n<parameter=path>\nb.py\n</parameter>\n</function>\n</tool_call>",
     [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})], "qwen3_coder", ""),
    ("qwen3_coder_bare_without_wrapper",
     "Checking.\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n</function>",
     [("read_file", {"path": "a.py"})], "qwen3_coder", "Checking."),
    # the text ends inside the call: its value may be cut short, so nothing is recovered (issue 33)
    ("qwen3_coder_missing_final_closes",
     "<tool_call>\n<function=run_shell>\n<parameter=command>\npytest -q\n",
     [], "cut", "<tool_call>\n<function=run_shell>\n<parameter=command>\npytest -q\n"),
    ("qwen3_coder_missing_parameter_close",
     "<tool_call>\n<function=run_shell>\n<parameter=command>\nls\n</function>\n</tool_call>",
     [("run_shell", {"command": "ls"})], "qwen3_coder", ""),
    ("qwen3_coder_unknown_name_kept",
     "<tool_call>\n<function=browse_web>\n<parameter=url>\nhttp://x\n</parameter>\n</function>\n</tool_call>",
     [("browse_web", {"url": "http://x"})], "qwen3_coder", ""),
    ("qwen3_coder_no_parameters",
     "<tool_call>\n<function=finish>\n</function>\n</tool_call>", [("finish", {})], "qwen3_coder", ""),
    ("json_fenced_small_model",
     'I will read the file.\n```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```',
     [("read_file", {"path": "a.py"})], "json", "I will read the file."),
    ("json_bare_object_parameters",
     '{"name": "grep", "parameters": {"pattern": "foo"}}', [("grep", {"pattern": "foo"})], "json", ""),
    ("json_fenced_list_of_calls",
     '```json\n[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "read_file", "arguments": {"path": "b"}}]\n```',
     [("read_file", {"path": "a"}), ("read_file", {"path": "b"})], "json", ""),
    ("json_openai_shaped_object",
     '{"type": "function", "function": {"name": "finish", "arguments": "{\\"summary\\": \\"ok\\"}"}}',
     [("finish", {"summary": "ok"})], "json", ""),
]

# Outputs that must yield no call at all: content comes back unchanged.
NO_CALLS = [
    ("plain_prose", "The bug is in parse(); it returns {} when the input is empty."),
    ("placeholder_hermes", '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'),
    ("placeholder_name_string", '<tool_call>{"name": "tool_name", "arguments": {}}</tool_call>'),
    ("placeholder_braced", '<tool_call>{"name": "{name}", "arguments": {}}</tool_call>'),
    ("placeholder_xml", "<tool_call>\n<function=<action>>\n</function>\n</tool_call>"),
    ("placeholder_xml_name", "<function=function_name>\n<parameter=arg>\nx\n</parameter>\n</function>"),
    ("json_unknown_tool", '```json\n{"name": "send_email", "arguments": {"to": "a@b"}}\n```'),
    ("json_bare_unknown_tool", '{"name": "send_email", "arguments": {"to": "a@b"}}'),
    ("json_data_not_call", '```json\n{"name": "keel", "version": "0.1"}\n```'),
    # A call-shaped object inside prose is an example, not a request (issue 22): it used to run.
    ("json_bare_with_prose", 'Sure. {"name": "read_file", "arguments": {"path": "a.py"}} Done.'),
    ("json_quoted_in_prose",
     'To delete a file one could call a tool like this example: {"name": "run_shell", "arguments": '
     '{"command": "touch X"}} but I will read the code first.'),
    ("json_nested_in_other_data", '{"examples": [{"name": "read_file", "arguments": {"path": "a"}}]}'),
    ("json_call_in_python_fence",
     '```python\nCALL = {"name": "read_file", "arguments": {"path": "a.py"}}\n```'),
    ("json_mixed_list_fence", '```json\n[{"name": "read_file", "arguments": {}}, {"x": 1}]\n```'),
    ("empty", ""),
]


@pytest.mark.parametrize(("output", "expected", "fmt", "rest"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_recovers_calls(output, expected, fmt, rest):
    got_rest, got_calls, got_fmt = _calls(output)
    assert got_calls == expected
    assert got_fmt == fmt
    assert got_rest == rest


@pytest.mark.parametrize("output", [c[1] for c in NO_CALLS], ids=[c[0] for c in NO_CALLS])
def test_no_call_leaves_content_alone(output):
    assert recover_text_tool_calls(output, TOOLS) == (output, [], "")


def test_ids_are_generated_in_order_from_id_start():
    text = ('<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
            '<tool_call>{"name": "read_file", "arguments": {"path": "b"}}</tool_call>')
    _, calls, _ = recover_text_tool_calls(text, TOOLS, id_start=7)
    assert [c.id for c in calls] == ["call_txt_7", "call_txt_8"]


def test_schema_keeps_string_parameters_as_strings():
    text = ("<function=write_file>\n<parameter=path>\nn.txt\n</parameter>\n"
            "<parameter=content>\n42\n</parameter>\n</function>")
    schemas = {"write_file": {"type": "object", "properties": {"path": {"type": "string"},
                                                               "content": {"type": "string"}}}}
    _, typed, _ = _calls(text, schemas=schemas)
    _, untyped, _ = _calls(text)
    assert typed == [("write_file", {"path": "n.txt", "content": "42"})]
    assert untyped == [("write_file", {"path": "n.txt", "content": 42})]


def test_schema_types_integer_parameters():
    text = "<function=grep>\n<parameter=pattern>\n1\n</parameter>\n<parameter=limit>\n5\n</parameter>\n</function>"
    schemas = {"grep": {"properties": {"pattern": {"type": "string"}, "limit": {"type": "integer"}}}}
    assert _calls(text, schemas=schemas)[1] == [("grep", {"pattern": "1", "limit": 5})]


def test_hermes_takes_precedence_over_json_lookalikes_in_prose():
    text = ('Example: {"name": "grep", "arguments": {"pattern": "x"}}\n'
            '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>')
    rest, calls, fmt = _calls(text)
    assert calls == [("read_file", {"path": "a"})]
    assert fmt == "hermes"
    assert rest.startswith("Example:")


# ---- retry.py ------------------------------------------------------------------------------

BACKOFF = [
    # (attempt, base, cap, retry_after, expected upper bound of the jitter window or exact value)
    (0, 0.5, 30.0, None, ("window", 0.5)),
    (1, 0.5, 30.0, None, ("window", 1.0)),
    (3, 0.5, 30.0, None, ("window", 4.0)),
    (10, 0.5, 30.0, None, ("window", 30.0)),
    (200, 0.5, 30.0, None, ("window", 30.0)),
    (0, 0.5, 30.0, 7.0, ("exact", 7.0)),
    (5, 0.5, 1.0, 3.0, ("exact", 3.0)),   # the server knows better than our cap
    (0, 0.5, 30.0, 0.0, ("exact", 0.0)),
    (0, 0.5, 30.0, 3600.0, ("exact", MAX_RETRY_AFTER_S)),
    (0, 0.5, 30.0, float("inf"), ("exact", MAX_RETRY_AFTER_S)),
    (0, 0.0, 30.0, None, ("exact", 0.0)),
]


@pytest.mark.parametrize(("attempt", "base", "cap", "retry_after", "expected"), BACKOFF)
def test_backoff_delay(attempt, base, cap, retry_after, expected):
    rng = random.Random(42)
    samples = [backoff_delay(attempt, base, cap, retry_after, rng) for _ in range(300)]
    kind, value = expected
    if kind == "exact":
        assert samples == [value] * len(samples)
    else:
        assert all(0.0 <= s <= value for s in samples)
        # Full jitter spreads over the whole window, not just near its top.
        assert min(samples) < value * 0.1 and max(samples) > value * 0.9


RETRY_AFTER = [
    ({}, None),
    (None, None),
    ({"Retry-After": "3"}, 3.0),
    ({"retry-after": "1.5"}, 1.5),
    ({"Retry-After": " 2 "}, 2.0),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
    ({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),   # relative to the fixed `now` below
    ({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),    # a date in the past: go now
    ({"Retry-After": "whenever"}, None),
    ({"Retry-After": "-5"}, None),
    ({"Content-Type": "application/json"}, None),
]
_NOW = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT


@pytest.mark.parametrize(("headers", "expected"), RETRY_AFTER)
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers, now=_NOW) == expected


# ---- form 4: llama-cpp-python's chatml-function-calling "functions.NAME:" lines ----------------


@pytest.mark.parametrize(("content", "expected"), [
    ("functions.list_dir:", [("list_dir", {})]),
    ('functions.read_file:\n{"path": "a.py"}', [("read_file", {"path": "a.py"})]),
    ('Let me look.\nfunctions.read_file: {"path": "a.py", "limit": 5}', [("read_file", {"path": "a.py", "limit": 5})]),
    ("`functions.list_dir`:", [("list_dir", {})]),
])
def test_functions_prefix_form(content, expected):
    _, calls, fmt = recover_text_tool_calls(content, {"list_dir", "read_file"})
    assert fmt == "functions"
    assert [(c.name, json.loads(c.arguments)) for c in calls] == expected


@pytest.mark.parametrize("content", [
    "I will use functions.list_dir: to look around",   # a mention inside prose
    "functions.list_dir: shows the files",              # prose after the name
    "functions.delete_everything:",                     # not an offered tool
])
def test_functions_prefix_form_needs_an_offered_tool_and_no_prose(content):
    assert recover_text_tool_calls(content, {"list_dir", "read_file"})[1] == []


@pytest.mark.parametrize(("content", "expected"), [
    ("functions.list_dir: shows the files", True),
    ('<tool_call>{"name": "read_file", "arguments": {"path": ', True),
    ('read_file(path="a.py")', True),
    ("The bug was in add(); I fixed it and the tests pass.", False),
    ("I used read_file to look at calc.py.", False),
])
def test_looks_like_tool_call(content, expected):
    assert looks_like_tool_call(content, {"list_dir", "read_file"}) is expected


def test_text_invented_after_a_call_is_not_kept():
    content = ('I will read it.\n```json\n{"name": "read_file", "arguments": {"path": "app.py"}}\n```\n\n'
               "After running this command, let's assume the output is:\n```\ndef greet():\n    return 'x'\n```\n"
               "Therefore greet() returns 'x'.")
    remaining, calls, _ = recover_text_tool_calls(content, {"read_file"})
    assert [c.name for c in calls] == ["read_file"]
    assert remaining == "I will read it."


# ---- issue 22: values end where the format says; calls only where the format says ----------------

WRITE_SCHEMA = {"write_file": {"type": "object", "properties": {"path": {"type": "string"},
                                                                "content": {"type": "string"}}}}
QUOTED_CALL = ('doc = """\n<tool_call>\n<function=run_shell>\n<parameter=command>\ntouch X\n</parameter>\n'
               '</function>\n</tool_call>\n"""\n')


@pytest.mark.parametrize("content", [
    QUOTED_CALL,
    'closing = "</parameter>"\nopening = "<parameter=path>"\n',
    "</parameter>\n<parameter=new_string>\nx\n</parameter>\n",
])
def test_write_file_content_with_tag_like_text_is_written_whole_and_runs_nothing_else(content):
    text = ("<tool_call>\n<function=write_file>\n<parameter=path>\nm.py\n</parameter>\n"
            f"<parameter=content>\n{content}</parameter>\n</function>\n</tool_call>")
    _, calls, _ = _calls(text, schemas=WRITE_SCHEMA)
    assert calls == [("write_file", {"path": "m.py", "content": content.rstrip("\n")})]


def test_hermes_content_holding_a_quoted_tool_call_is_one_call():
    args = {"path": "t.md", "content": "Call like <tool_call>{\"name\": \"run_shell\"}</tool_call> here"}
    text = "<tool_call>" + json.dumps({"name": "write_file", "arguments": args}) + "</tool_call>"
    assert _calls(text)[1] == [("write_file", args)]


def test_values_are_typed_by_schema_with_python_literal_fallbacks():
    schemas = {"t": {"properties": {"obj": {"type": "object"}, "opt": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                                    "arr": {"type": "array"}, "s": {"type": "string"}}}}
    text = ("<function=t><parameter=obj>{'key': 'value'}</parameter><parameter=opt>None</parameter>"
            "<parameter=arr>['a', 'b']</parameter><parameter=s>null</parameter></function>")
    assert _calls(text, {"t"}, schemas=schemas)[1] == [("t", {"obj": {"key": "value"}, "opt": None,
                                                             "arr": ["a", "b"], "s": "null"})]


@pytest.mark.parametrize("wrapper", ["<tools>\n{}\n</tools>", "<response>{}</response>", "<JSON>\n{}\n</JSON>",
                                     "```xml\n<response>\n{}\n</response>\n```"])
def test_wrapper_tags_around_a_whole_reply_call_are_removed(wrapper):
    text = wrapper.replace("{}", '{"name": "grep", "arguments": {"pattern": "x"}}')
    rest, calls, _ = _calls(text)
    assert calls == [("grep", {"pattern": "x"})]
    assert rest == ""


HOSTILE = {  # about 1 MB each: repeated tags, separators, unclosed nesting, many calls
    "param_opens": "<parameter=" * 90_000,
    "param_closes": "</parameter>" * 85_000,
    "closes_in_value": "<tool_call><function=write_file><parameter=content>" + "</parameter> x" * 70_000,
    "function_opens": "<function=a>" * 85_000,
    "tool_call_opens": "<tool_call>" * 90_000,
    "fences": "```" * 330_000,
    "braces": "{" * 1_000_000,
    "call_prefixes": '{"name": "grep", "arguments": ' * 33_000,
    "many_calls": '<tool_call>{"name": "grep", "arguments": {}}</tool_call>' * 18_000,
    "functions_lines": "functions.grep:\n" * 60_000,
    "one_long_word": "a" * 1_000_000,
    "params_without_closes": "<function=write_file>" + "".join(f"<parameter=p{i}>v" for i in range(60_000)),
    "closes_then_text": "<function=write_file>" + "".join(f"<parameter=p{i}>v</parameter>x" for i in range(40_000)),
    "function_json_prefixes": '<function=a>{"k": ' * 60_000,
    "unclosed_string": '<tool_call>{"name": "grep", "arguments": {"pattern": "' + "x" * 1_000_000,
    "name_hints": '"name": "' * 100_000 + "a" * 100_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_is_handled_in_linear_time(text):
    import time
    started = time.perf_counter()
    recover_text_tool_calls(text, TOOLS, schemas=WRITE_SCHEMA)
    looks_like_tool_call(text, TOOLS)
    assert time.perf_counter() - started < 5.0


def test_a_call_after_grammar_prose_is_a_call_only_under_the_grammar() -> None:
    """The in-process engine's grammar allows exactly one line of prose, then the call object; the
    1.5B model writes that shape every turn. Under the grammar it is a call (it cannot be anything
    else); in free text the same object after prose may be a quoted example and is not run.
    Measured: treating it as free text left every reply of a six-case 1.5B batch idle."""
    reply = 'I will read the file.\n{"name": "read_file", "arguments": {"path": "calc.py"}}'
    content, calls, fmt = recover_text_tool_calls(reply, {"read_file"}, after_prose=True)
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path": "calc.py"}')]
    assert content == "I will read the file." and fmt == "json"
    assert recover_text_tool_calls(reply, {"read_file"})[1] == []
    quoted = 'Call <b>this</b> like {"name": "read_file", "arguments": {"path": "x"}}'
    assert recover_text_tool_calls(quoted, {"read_file"}, after_prose=True)[1] == []


# -- a note that quotes code unescaped (the grammar lets a note hold a quote that cannot end it) ----------
NOTE = 'Replace format_price(cents, currency="USD") with "$1,234.50" formatting'


@pytest.mark.parametrize("content", [
    '```json\n{"name": "finish", "arguments": {"summary": "' + NOTE + '"}}\n```',
    '{"name": "finish", "arguments": {"summary": "' + NOTE + '"}}',
    '<tool_call>\n{"name": "finish", "arguments": {"summary": "' + NOTE + '"}}\n</tool_call>',
])
def test_a_note_quoting_code_unescaped_is_read_whole(content: str) -> None:
    """Measured on the 1.5B: "Replace the line starting with 'def format_price(cents, currency=" was all that
    was left of its change notes, cut at the first unescaped quote."""
    _, calls, _ = _calls(content)
    assert calls == [("finish", {"summary": NOTE})]


@pytest.mark.parametrize(("text", "fixed"), [
    ('{"a": "x"}', None),                                             # nothing to escape
    ('{"a": "say "hi" now"}', '{"a": "say \\"hi\\" now"}'),
    ('{"a": "f("x")", "b": 1}', '{"a": "f(\\"x\\")", "b": 1}'),       # a quote before ")" is inside
    ('{"a": ["p", "q"], "b": "it"s"}', '{"a": ["p", "q"], "b": "it\\"s"}'),   # array items end at , and ]
    ('{"a": "esc \\" kept "x""}', '{"a": "esc \\" kept \\"x\\""}'),   # an escaped quote stays as it is
    ('{"a": "end" }', None),
])
def test_requote_escapes_only_the_quotes_that_cannot_end_a_string(text: str, fixed: str | None) -> None:
    from keel.engine.recovery_json import requote

    assert requote(text) == fixed
    if fixed is not None:
        json.loads(fixed)


def test_requote_is_linear_on_hostile_text() -> None:
    import time

    from keel.engine.recovery_json import requote

    started = time.perf_counter()
    requote('{"a": "' + '" ' * 200_000 + '"}')
    requote('{"a": "' + '"' + ' ' * 400_000 + 'x"}')
    assert time.perf_counter() - started < 5
