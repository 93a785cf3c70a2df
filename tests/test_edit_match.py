"""The edit matcher: every tier, refusals that list candidates, and hints that name the region."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from keel.tools.edit_match import EditRequest, apply_replacements, edited_ranges, find_edit, find_edits

CLASSY = (
    "import os\n"
    "\n"
    "class Store:\n"
    "    def load(self, path):\n"
    "        with open(path) as fh:\n"
    "            data = fh.read()\n"
    "        return data\n"
    "\n"
    "    def save(self, path, data):\n"
    "        with open(path, 'w') as fh:\n"
    "            fh.write(data)\n"
    "        return len(data)\n"
)


def edited(content: str, old: str, new: str, **kw) -> tuple[str, str]:
    res = find_edit(content, old, new, **kw)
    assert res.ok, res.error
    return apply_replacements(content, res.replacements), res.tier


def test_exact_unique_match_replaces_only_that_text():
    out, tier = edited(CLASSY, "            data = fh.read()\n", "            data = fh.read().strip()\n")
    assert tier == "exact"
    assert out == CLASSY.replace("data = fh.read()", "data = fh.read().strip()")


def test_crlf_in_old_text_matches_lf_content():
    old = "        with open(path) as fh:\r\n            data = fh.read()\r\n"
    new = "        with open(path, 'rb') as fh:\r\n            data = fh.read()\r\n"
    out, tier = edited(CLASSY, old, new)
    assert tier == "line_endings"
    assert "with open(path, 'rb') as fh:\n            data = fh.read()\n" in out
    assert "\r" not in out


def test_dedented_old_text_is_reindented_to_the_file():
    old = "def load(self, path):\n    with open(path) as fh:\n        data = fh.read()\n"
    new = "def load(self, path):\n    with open(path) as fh:\n        data = fh.read()\n    print(data)\n"
    out, tier = edited(CLASSY, old, new)
    assert tier == "reindent"
    assert "            data = fh.read()\n        print(data)\n        return data\n" in out


def test_over_indented_old_text_is_shifted_back():
    old = "            return len(data)\n"
    new = "            return len(data) + 1\n"
    # single-line old_text over-indented by 4: not a substring, the shift is removed
    out, tier = edited(CLASSY, "    " + old, "    " + new)
    assert tier == "reindent"
    assert out.endswith("        return len(data) + 1\n")


def test_tab_indented_file_with_dedented_old_text():
    content = "func main() {\n\tif ok {\n\t\tgo()\n\t}\n}\n"
    out, tier = edited(content, "if ok {\n\tgo()\n}\n", "if ok {\n\tgo()\n\tstop()\n}\n")
    assert tier == "reindent"
    assert out == "func main() {\n\tif ok {\n\t\tgo()\n\t\tstop()\n\t}\n}\n"


def test_spaces_in_old_text_for_a_tab_indented_file_keep_the_tabs():
    content = "func main() {\n\tif ok {\n\t\tgo()\n\t}\n}\n"
    out, tier = edited(content, "    if ok {\n        go()\n", "    if ok {\n        go()\n        stop()\n")
    assert tier == "whitespace"
    assert out == "func main() {\n\tif ok {\n\t\tgo()\n\t\tstop()\n\t}\n}\n"


def test_tabs_in_old_text_for_a_space_indented_file_keep_the_spaces():
    old = "\tdef save(self, path, data):\n\t\twith open(path, 'w') as fh:\n"
    new = "\tdef save(self, path, data):\n\t\twith open(path, 'a') as fh:\n"
    out, tier = edited(CLASSY, old, new)
    assert tier == "whitespace"
    assert "    def save(self, path, data):\n        with open(path, 'a') as fh:\n" in out


def test_trailing_and_inner_whitespace_drift():
    old = "        with open(path)  as fh:   \n            data = fh.read()  \n"
    new = "        with open(path)  as fh:   \n            data = fh.read(100)  \n"
    out, tier = edited(CLASSY, old, new)
    assert tier == "whitespace"
    # the unchanged line comes from the file; the changed one loses the model's trailing blanks
    assert "        with open(path) as fh:\n            data = fh.read(100)\n" in out


def test_curly_quotes_match_straight_and_the_file_keeps_straight_quotes():
    old = "        with open(path, ‘w’) as fh:\n            fh.write(data)\n"
    new = "        with open(path, ‘w’) as fh:\n            fh.write(data + “\\n”)\n"
    out, tier = edited(CLASSY, old, new)
    assert tier == "quotes"
    assert "        with open(path, 'w') as fh:\n            fh.write(data + \"\\n\")\n" in out


def test_elision_keeps_the_elided_lines():
    old = "    def load(self, path):\n        ...\n        return data\n"
    new = "    def load(self, path, mode='r'):\n        ...\n        return data\n"
    out, tier = edited(CLASSY, old, new)
    assert tier == "elision"
    assert out == CLASSY.replace("def load(self, path):", "def load(self, path, mode='r'):")


def test_elision_needs_the_same_structure_in_new_text():
    res = find_edit(CLASSY, "    def load(self, path):\n    ...\n        return data\n",
                    "    def load(self, path, mode):\n        return data\n")
    assert not res.ok and "'...'" in res.error


def test_elision_refuses_an_ambiguous_part():
    content = "def a():\n    x = 1\n    return x\n\ndef b():\n    x = 1\n    return x\n\ndef c():\n    return 0\n"
    res = find_edit(content, "def a():\n    ...\n    return x\n", "def a():\n    ...\n    return x + 1\n")
    assert not res.ok
    assert res.candidates == (3, 7) and "part 2" in res.error
    # the same shape with unique parts goes through, elided lines kept
    out, tier = edited(content, "def b():\n    ...\n    return 0\n", "def b():\n    ...\n    return 1\n")
    assert tier == "elision"
    assert out.endswith("def b():\n    x = 1\n    return x\n\ndef c():\n    return 1\n")


def test_exact_duplicates_are_refused_with_every_line_listed():
    content = "a = 1\nb = 2\n\na = 1\nb = 2\n\na = 1\nc = 3\n"
    res = find_edit(content, "a = 1\nb = 2\n", "a = 1\nb = 20\n")
    assert not res.ok
    assert res.candidates == (1, 4)
    assert "lines 1, 4" in res.error and "replace_all" in res.error


def test_a_drifted_copy_elsewhere_makes_a_fuzzy_match_ambiguous():
    # old_text is indented like neither copy: re-indenting could hit either, so it must refuse
    content = "def f():\n    x = 1\n    y = 2\n\nclass C:\n    def g(self):\n        x = 1\n        y = 2\n"
    res = find_edit(content, "  x = 1\n  y = 2\n", "  x = 1\n  y = 3\n")
    assert not res.ok
    assert res.candidates == (2, 7)


def test_line_hint_never_chooses_between_candidates():
    content = "x = 1\ny = 0\nx = 1\n"
    res = find_edit(content, "x = 1\n", "x = 2\n", line_hint=3)
    assert not res.ok and res.candidates == (1, 3)
    assert "line_hint=3 does not choose" in res.error


def test_line_hint_far_from_the_unique_match_is_mentioned():
    res = find_edit(CLASSY, "        return len(data)\n", "        return 0\n", line_hint=1)
    assert res.ok
    assert any("line_hint was 1" in n and "line 12" in n for n in res.notes)
    assert not find_edit(CLASSY, "        return len(data)\n", "        return 0\n", line_hint=11).notes


def test_not_found_names_the_closest_region_with_visible_whitespace():
    old = "        with open(path) as fh:\n\t\t\tdata = fh.read()\n        return data  \n"
    res = find_edit(CLASSY, old.replace("read()", "read(1)"), "pass\n")
    assert not res.ok
    assert res.closest == (5, 7)
    assert "lines 5-7" in res.error
    assert "     6\t            data = fh.read()" in res.error   # the file's lines, numbered like read_file
    assert "→→→data·=·fh.read(1)" in res.error                     # what the model sent, whitespace visible
    assert "········return·data··" in res.error


def test_not_found_says_when_new_text_is_already_there():
    res = find_edit(CLASSY, "        return data.strip()\n", "        return data\n")
    assert not res.ok
    assert res.already_applied_at == 7
    assert "already" in res.error and "line 7" in res.error


def test_an_insert_that_is_already_there_is_not_applied_twice():
    content = "import os\nimport sys\n\nprint(1)\n"
    res = find_edit(content, "import os\n", "import os\nimport sys\n")
    assert not res.ok
    assert res.already_applied_at == 1


def test_nothing_similar_gives_no_region():
    res = find_edit(CLASSY, "completely unrelated text\n", "x\n")
    assert not res.ok and res.closest is None and "No similar region" in res.error


def test_replace_all_counts_every_occurrence():
    content = "foo(1)\nbar(foo)\nfoo(2)\n"
    res = find_edit(content, "foo", "baz", replace_all=True)
    assert res.ok and len(res.replacements) == 3
    assert apply_replacements(content, res.replacements) == "baz(1)\nbar(baz)\nbaz(2)\n"


def test_replace_all_at_a_fuzzy_tier():
    content = "if a:\n    x = 1\nif b:\n    x = 1\n"
    res = find_edit(content, "x  =  1", "x = 2", replace_all=True)
    assert res.ok and res.tier == "whitespace" and len(res.replacements) == 2
    assert apply_replacements(content, res.replacements) == "if a:\n    x = 2\nif b:\n    x = 2\n"


def test_a_dropped_final_newline_in_new_text_does_not_join_lines():
    out, _ = edited("a\nb\nc\n", "b\n", "B")
    assert out == "a\nB\nc\n"
    out, _ = edited("a\nb\nc\n", "b", "B\n")
    assert out == "a\nB\nc\n"


def test_deleting_lines_leaves_no_blank_line():
    out, tier = edited(CLASSY, "  import os\n", "")   # drifted indentation, fuzzy tier
    assert tier == "reindent" or tier == "whitespace"
    assert out == CLASSY[len("import os\n"):]


def test_empty_or_identical_texts_are_errors():
    assert "empty" in find_edit(CLASSY, "", "x").error
    assert "identical" in find_edit(CLASSY, "x", "x").error


def test_several_edits_are_all_or_nothing():
    edits = [EditRequest("import os\n", "import os\nimport io\n"),
             EditRequest("        return data\n", "        return data or ''\n")]
    res = find_edits(CLASSY, edits)
    assert res.ok and res.tiers == ("exact", "exact")
    out = apply_replacements(CLASSY, res.replacements)
    assert out.startswith("import os\nimport io\n") and "return data or ''" in out
    assert edited_ranges(CLASSY, res.replacements) == [(1, 2), (8, 8)]

    bad = [*edits, EditRequest("no such line\n", "x\n")]
    res = find_edits(CLASSY, bad)
    assert not res.ok and not res.replacements
    assert res.error.startswith("edit 3 of 3 failed") and "NO edit was applied" in res.error


def test_overlapping_edits_are_refused():
    res = find_edits(CLASSY, [EditRequest("    def load(self, path):\n", "    def load(self, p):\n"),
                              EditRequest("load(self, path)", "load(self, path=None)")])
    assert not res.ok and "overlap" in res.error


def test_an_edit_that_depends_on_an_earlier_one_is_explained():
    res = find_edits(CLASSY, [EditRequest("import os\n", "import sys\n"),
                              EditRequest("import sys\n", "import sys, re\n")])
    assert not res.ok and "only exists after the earlier edits" in res.error


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a = 1", "b = 2", "    c()", "", "d", "a = 1  "]), min_size=1, max_size=12),
       st.data())
def test_an_applied_edit_is_always_at_the_single_exact_occurrence(lines, data):
    content = "\n".join(lines) + "\n"
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(i + 1, len(lines)))
    old = "\n".join(lines[i:j]) + "\n"
    res = find_edit(content, old, "NEW\n")
    occurrences = sum(content.startswith(old, k) for k in range(len(content)))   # overlapping ones too
    if occurrences > 1:
        assert not res.ok and len(res.candidates) >= 1   # never guessed
    else:
        assert res.ok and res.tier == "exact"
        assert apply_replacements(content, res.replacements) == content.replace(old, "NEW\n", 1)


_DRIFTS = {
    "indent": lambda x: "    " + x if x.strip() else x,
    "dedent": lambda x: x[2:] if x.startswith("  ") else x.lstrip("\t"),
    "tabs": lambda x: x.replace("    ", "\t"),
    "trailing": lambda x: x + "  ",
    "inner": lambda x: x.replace(" = ", "  =  "),
}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["x = 1", "    x = 1", "y = 2", "        y = 2", "", "\tz()", "if a:"]),
                min_size=1, max_size=14),
       st.sampled_from(sorted(_DRIFTS)), st.data())
def test_a_drifted_edit_lands_on_its_own_lines_or_nowhere(lines, drift, data):
    content = "\n".join(lines) + "\n"
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(i + 1, min(len(lines), i + 4)))
    if not any(x.strip() for x in lines[i:j]):
        return
    old = [_DRIFTS[drift](x) for x in lines[i:j]]
    res = find_edit(content, "\n".join(old) + "\n", "\n".join([*old, "NEW"]) + "\n")
    if res.ok and res.tier not in ("exact", "line_endings"):
        # a tolerant tier only ever accepts the one window that matches under the loosest comparison
        assert [(r.first_line, r.last_line) for r in res.replacements] == [(i + 1, j)]
    elif res.ok:
        assert all(content[r.start:r.end] == "\n".join(old) + "\n" for r in res.replacements)


def test_line_number_prefixes_from_read_file_are_removed_only_at_that_line():
    content = "a = 1\nb = 2\nc = 3\n"
    out, tier = edited(content, "     2\tb = 2\n", "     2\tb = 20\n")
    assert tier == "line_numbers" and out == "a = 1\nb = 20\nc = 3\n"
    # numbers naming another line: the prefix must not move the edit
    assert not find_edit(content, "     3\tb = 2\n", "     3\tb = 20\n").ok


def test_blank_lines_added_around_old_text_are_ignored():
    out, _ = edited("a = 1\nb = 2\nc = 3\n", "\n\nb = 2\n\n", "\n\nb = 5\n\n")
    assert out == "a = 1\nb = 5\nc = 3\n"
