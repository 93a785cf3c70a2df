"""The tool-call grammar as a pure function: every built-in tool's schema in, a GBNF grammar out
that admits plain prose or well-formed calls of offered tools, and nothing else. Checked with a
small GBNF recognizer (tests/gbnf_check.py), so no model is needed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gbnf_check import accepts

pytest.importorskip("llama_cpp", reason="the grammar uses llama.cpp's schema converter (pip install 'keel[local]')")

from keel.engine.grammar import GrammarError, call_schema, tool_call_grammar, undefined_rules  # noqa: E402
from keel.tools.catalog import default_tools  # noqa: E402
from keel.tools.registry import ToolRegistry  # noqa: E402

TOOLS = ToolRegistry(default_tools()).schemas()
GRAMMAR = tool_call_grammar(TOOLS)


def sample(schema: dict[str, Any]) -> Any:
    """A minimal value the schema accepts (required fields only)."""
    if "anyOf" in schema:
        return sample(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: sample(v) for k, v in schema.get("properties", {}).items() if k in schema.get("required", [])}
    if kind == "array":
        return [sample(schema["items"])] if schema.get("minItems") else []
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x" * max(1, schema.get("minLength", 1))


def wrap(name: str, arguments: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


@pytest.mark.parametrize("tool", TOOLS, ids=[t["function"]["name"] for t in TOOLS])
def test_each_builtin_tool_has_its_calls_admitted_and_its_schema_enforced(tool: dict[str, Any]) -> None:
    fn = tool["function"]
    args = sample(fn["parameters"])
    assert accepts(GRAMMAR, wrap(fn["name"], args)), f"a minimal valid {fn['name']} call was refused"
    assert not accepts(GRAMMAR, wrap(fn["name"], {**args, "not_an_argument": 1})), "an invented key passed"
    if fn["parameters"].get("required"):
        assert not accepts(GRAMMAR, wrap(fn["name"], {})), "a call without its required fields passed"
    assert not accepts(GRAMMAR, wrap(fn["name"] + "_x", args)), "an unknown tool name passed"


def test_the_grammar_is_complete() -> None:
    assert undefined_rules(GRAMMAR) == set()
    assert GRAMMAR.startswith("root ::=")


@pytest.mark.parametrize("reply", [
    "The number in notes.txt is 42.",
    "",
    "I will read the file first.\n" + wrap("read_file", {"path": "calc.py"}),
    wrap("edit_file", {"path": "c.py", "old_text": "    return a - b\n", "new_text": "    return a + b\n"}),
    wrap("write_file", {"path": "t.py", "content": 'print("<ok> {}")\n'}),
    '```json\n{"name": "read_file", "arguments": {"path": "calc.py"}}',   # bare, as 0.5B models write it
    # a raw line break inside a string: read leniently, as models write code
    "<tool_call>\n" + '{"name": "write_file", "arguments": {"path": "t.py", "content": "a\n\tb"}}' + "\n</tool_call>",
])
def test_prose_and_well_formed_calls_are_admitted(reply: str) -> None:
    assert accepts(GRAMMAR, reply)


@pytest.mark.parametrize("reply", [
    '{"name": "read_notes", "arguments": {"path": "calc.py"}}',            # a bare call of no offered tool
    'Use this: {"path": "calc.py"}',                                        # braces in prose
    "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"calc.py\"}\n</tool_call>",  # unbalanced
    "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"calc.py\"}}",  # never closed
    wrap("read_file", {"path": 7}),                                          # wrong type
    "<tool_call>\n" + '{"name": "write_file", "arguments": {"path": "t.py", "content": "a\x01b"}}' + "\n</tool_call>",
    "Open calc.py in a text editor <b>now</b>.",                             # '<' in prose
    wrap("list_dir", {"path": "."}) + "\n" + wrap("list_dir", {"path": "."}),  # one call per reply
])
def test_malformed_calls_cannot_be_produced(reply: str) -> None:
    assert not accepts(GRAMMAR, reply)


def test_schemas_are_made_strict_without_touching_the_originals() -> None:
    before = json.dumps(TOOLS, sort_keys=True)
    schema = call_schema(TOOLS)
    edit = next(v for v in schema["anyOf"] if v["properties"]["name"]["const"] == "edit_file")
    assert edit["properties"]["arguments"]["additionalProperties"] is False
    assert edit["properties"]["arguments"]["properties"]["edits"]["items"]["additionalProperties"] is False
    assert json.dumps(TOOLS, sort_keys=True) == before


def test_with_require_call_prose_alone_is_refused_but_prose_before_a_call_is_not() -> None:
    required = tool_call_grammar(TOOLS, require_call=True)
    assert not accepts(required, "The number is 42.")
    assert not accepts(required, '```json\n["list_dir", "finish"]\n```')   # what a 0.5B model kept sending
    assert accepts(required, "Done.\n" + wrap("finish", {"summary": "fixed"}))
    assert accepts(required, wrap("read_file", {"path": "calc.py"}))
    bare = '{"name": "read_file", "arguments": {"path": "calc.py"}}'
    assert accepts(required, "```json\n" + bare)                     # the 1.5B model's opener, once
    assert not accepts(required, "```json\n```json\n```json\n" + bare)   # …not twenty times over
    assert not accepts(required, "x" * 241 + "\n" + bare)             # nor a paragraph before the call


def test_nothing_to_constrain_is_a_clear_error() -> None:
    with pytest.raises(GrammarError, match="no tools"):
        tool_call_grammar([])
    with pytest.raises(GrammarError, match="without a name"):
        tool_call_grammar([{"type": "function", "function": {"parameters": {}}}])


def test_a_tool_without_parameters_takes_an_empty_object() -> None:
    g = tool_call_grammar([{"type": "function", "function": {"name": "ping"}}])
    assert accepts(g, wrap("ping", {}))
    assert not accepts(g, wrap("ping", {"x": 1}))


def test_a_call_with_raw_line_breaks_in_a_string_is_recovered_as_proper_json() -> None:
    from keel.engine.recovery import recover_text_tool_calls

    reply = '{"name": "edit_file", "arguments": {"path": "t.py", "old_text": "def f(a):", "new_text": "def f(a, b=1):\n    if b:"}}'
    _content, calls, _fmt = recover_text_tool_calls(reply, {"edit_file"})
    assert len(calls) == 1
    assert json.loads(calls[0].arguments)["new_text"] == "def f(a, b=1):\n    if b:"


SLIM = None


def slim_grammar() -> str:
    global SLIM
    if SLIM is None:
        from keel.drive.change import make_change_tool
        from keel.tools.small import small_tools

        SLIM = tool_call_grammar(ToolRegistry(small_tools(make_change_tool())).schemas(), require_call=True)
    return SLIM


def raw(name: str, arguments_json: str) -> str:
    return f'{{"name": "{name}", "arguments": {arguments_json}}}'


def test_a_note_is_one_line_that_must_end() -> None:
    """Recorded (1.5B model, twice in one batch): the change note closed with ' instead of ", and the
    string ran on through a line break, "```" and <|im_start|> until keel cut the reply."""
    g = slim_grammar()
    note = "Change the line 'return total // per_page' to round up"
    assert accepts(g, raw("change_file", json.dumps({"path": "p.py", "change": note})))
    assert accepts(g, raw("change_file", json.dumps({"path": "p.py", "change": "two\nlines, escaped"})))
    recorded = '{"path": "p.py", "change": "Change it to \'x = 1\'}}\n```<|im_start|>\n"}'
    assert not accepts(g, raw("change_file", recorded))
    assert not accepts(g, raw("finish", '{"summary": "fixed\nthe bug"}'))
    assert accepts(g, raw("finish", json.dumps({"summary": "y" * 600})))
    assert not accepts(g, raw("finish", json.dumps({"summary": "y" * 601})))
    assert not accepts(g, raw("finish", json.dumps({"summary": ""})))


def test_code_fields_still_take_raw_line_breaks_and_any_length() -> None:
    g = slim_grammar()
    new_text = "def f(a, b=1):\n" + "    a += b\n" * 80
    assert accepts(g, '{"name": "edit_file", "arguments": {"path": "p.py", "old_text": "def f(a):", "new_text": "'
               + new_text + '"}}')


def test_notes_are_bounded_in_gbnf_not_spelled_out_by_the_converter() -> None:
    """llama.cpp's converter writes maxLength N as N nested optional groups; keel writes {m,n}."""
    g = slim_grammar()
    assert "keel-note-char{1,600}" in g
    assert "(char (char" not in g
    assert undefined_rules(g) == set()
    assert undefined_rules(GRAMMAR) == set()   # remember's learning is a note too
    assert "keel-note-char{1,500}" in GRAMMAR


def test_a_note_may_hold_a_quote_that_cannot_end_it() -> None:
    """Measured on the 1.5B: notes quoting code unescaped were cut at the first quote (4 runs of 40)."""
    g = slim_grammar()
    note = 'Replace format_price(cents, currency="USD") with "$1,234.50"'
    assert accepts(g, raw("change_file", '{"path": "m.py", "change": "' + note + '"}'))
    assert accepts(g, raw("finish", '{"summary": "' + note + '"}'))
    # a quote followed by "," or "}" still ends it: what follows must be the object's own
    assert not accepts(g, raw("finish", '{"summary": "a", b"}'))
    assert not accepts(g, raw("change_file", '{"path": "m.py", "change": "x"}y"}'))
