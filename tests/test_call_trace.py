"""call_trace (keel.verify.calltrace): change_file's editor sees what the project's functions got and returned
while the failing tests ran, so a cause one call deeper than the failing line is in view.

Measured on the 1.5B: js-due-date (parseDate read March as April; the editor rewrote dueDate's file) and
py-mutable-default (``__init__`` got ``tags=['news']`` by default; the file came back unchanged 12 times)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import run_small

from keel.verify.calltrace import javascript_command, python_command, render

ARTICLES = ('class Article:\n    def __init__(self, title, tags=[]):\n        self.title = title\n'
            '        self.tags = tags\n\n'
            '    def __repr__(self):\n        return f"Article({self.title!r}, tags={self.tags!r})"\n\n\n'
            'def add_tag(article, tag):\n    if tag not in article.tags:\n        article.tags.append(tag)\n'
            '    return article\n\n\ndef first_tag(article):\n    return article.tags[0]\n')
TESTS = ('from articles import Article, add_tag, first_tag\n\n\n'
         'def test_new_articles_start_without_tags():\n    add_tag(Article("first"), "news")\n'
         '    assert Article("second").tags == []\n\n\n'
         'def test_first_tag_of_none():\n    assert first_tag(Article("x")) is None\n\n\n'
         'def test_passes():\n    assert add_tag(Article("ok", []), "a").tags == ["a"]\n')
FAILING = ["test_articles.py::test_new_articles_start_without_tags", "test_articles.py::test_first_tag_of_none"]
FIX = ARTICLES.replace("tags=[]):\n        self.title = title\n        self.tags = tags",
                       "tags=None):\n        self.title = title\n        self.tags = [] if tags is None else tags")


@pytest.fixture
def articles(tmp_path: Path) -> Path:
    ws = tmp_path / "blog"
    ws.mkdir()
    (ws / "articles.py").write_text(ARTICLES)
    (ws / "test_articles.py").write_text(TESTS)
    return ws


def test_a_python_trace_shows_the_default_each_call_got(articles: Path) -> None:
    out = subprocess.run(python_command(FAILING), shell=True, cwd=articles, capture_output=True, text=True).stdout
    text = render(out, FAILING)
    lines = text.splitlines()
    assert lines[1] == FAILING[0]
    assert "  __init__(title='second', tags=['news']) returned None" in lines
    assert "  add_tag(article=Article('first', tags=[]), tag='news') returned Article('first', tags=['news'])" in lines
    assert "    first_tag(article=Article('x', tags=['news'])) raised IndexError" not in lines   # depth 1, not 2
    assert "  first_tag(article=Article('x', tags=['news'])) returned 'news'" in lines
    assert not any("__repr__" in line for line in lines)   # what the trace itself calls to show a value
    assert "test_passes" not in text                        # only the failing tests


def test_a_call_that_raises_says_so(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def first(items):\n    return items[0]\n\n\ndef head(items):\n"
                                   "    return first(items)\n")
    (tmp_path / "test_m.py").write_text("from m import head\n\n\ndef test_head():\n    assert head([]) is None\n")
    ids = ["test_m.py::test_head"]
    text = render(subprocess.run(python_command(ids), shell=True, cwd=tmp_path, capture_output=True,
                                 text=True).stdout, ids)
    assert "  head(items=[]) raised IndexError\n    first(items=[]) raised IndexError" in text


def test_a_javascript_trace_goes_through_the_modules_a_test_requires(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "test").mkdir()
    (tmp_path / "src" / "dates.js").write_text(
        "'use strict';\nfunction parseDate(text) {\n  const [y, m, d] = text.split('-').map(Number);\n"
        "  return new Date(Date.UTC(y, m, d));\n}\nfunction formatDate(date) { return date.toISOString().slice(0, 10); }\n"
        "module.exports = { parseDate, formatDate };\n")
    (tmp_path / "src" / "invoice.js").write_text(
        "'use strict';\nconst { parseDate, formatDate } = require('./dates.js');\n"
        "function issued(inv) { return formatDate(parseDate(inv.issued)); }\nmodule.exports = { issued };\n")
    (tmp_path / "test" / "invoice.test.js").write_text(
        "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { issued } = require('../src/invoice.js');\n"
        "test('keeps the day', () => assert.strictEqual(issued({ issued: '2024-03-05' }), '2024-03-05'));\n"
        "test('other', () => assert.ok(true));\n")
    out = subprocess.run(javascript_command("test/invoice.test.js"), shell=True, cwd=tmp_path, capture_output=True,
                         text=True).stdout
    text = render(out, ["keeps the day"])
    assert text.splitlines()[1:] == [
        "keeps the day",
        "  issued({ issued: '2024-03-05' }) returned '2024-04-05'",
        "    parseDate('2024-03-05') returned 2024-04-05T00:00:00.000Z",
        "    formatDate(2024-04-05T00:00:00.000Z) returned '2024-04-05'"], text


def test_nothing_traced_is_nothing_shown() -> None:
    assert render("no mark here", FAILING) == ""
    assert render('@@keel-trace@@[["test", "t::a"]]\n', ["t::a"]) == ""


def run(ws: Path, script: list[dict[str, Any]], trace: bool) -> tuple[Any, list[dict], list[dict]]:
    return run_small(ws, "Every new article starts with the tags of the last one. Fix articles.py.", script,
                     max_steps=2, callee_change=False, call_trace=trace)


@pytest.mark.parametrize("trace", [True, False])
def test_the_editor_request_carries_the_trace(articles: Path, trace: bool) -> None:
    script = [{"tool_calls": [{"name": "change_file", "arguments": {"path": "articles.py",
                                                                    "change": "new articles start without tags"}}]},
              {"content": f"```python\n{FIX}```\n"},
              {"tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}]
    result, events, requests = run(articles, script, trace)
    editor = json.dumps(requests[1]["messages"])
    assert ("__init__(title='second', tags=['news']) returned None" in editor) is trace
    acted = [e for e in events if e["type"] == "assist" and e["name"] == "call_trace"]
    assert bool(acted) is trace and (articles / "articles.py").read_text() == FIX
