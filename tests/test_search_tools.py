"""find_files and grep on real trees; ripgrep and the Python fallback must agree exactly."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from keel.tools.base import ToolContext, ToolResult
from keel.tools.search import FIND_FILES, GREP, find_rg, grep_backend

BACKENDS = ["rg", "python"]


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


def write(root: Path, rel: str, content: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    git_init(root)
    write(root, ".gitignore", "*.log\n/generated/\n")
    write(root, "src/app.py", "import os\n\ndef load_cache():\n    return os.getcwd()\n\n# TODO: Foo later\n")
    write(root, "src/util.py", "def helper():\n    value = 'a.b'\n    return value  # foo\n")
    write(root, "src/nested/deep.py", "FOO = 1\nfoo = FOO + 1\n")
    write(root, "docs/guide.md", "# Guide\nUse foo() to start.\ncafé au lait\n")
    write(root, "README.md", "foo project\n")
    write(root, "notes.txt", "axb\n")
    write(root, "debug.log", "foo in a log\n")
    write(root, "generated/out.py", "foo = 'generated'\n")
    write(root, "node_modules/lib/index.js", "foo();\n")
    write(root, ".venv/lib/site.py", "foo = 1\n")
    write(root, "build/x.py", "foo\n")
    write(root, ".github/workflow.yml", "run: foo\n")
    write(root, ".env", "TOKEN=foo\n")
    write(root, "blob.bin", b"foo\x00\x01\x02")
    return root


def grep(root: Path, backend: str, **args: Any) -> ToolResult:
    ctx = ToolContext(workspace=root, extra={"grep_backend": backend})
    assert grep_backend(ctx) == backend
    return GREP.execute(GREP.spec.args(**args), ctx)


def find(root: Path, **args: Any) -> ToolResult:
    return FIND_FILES.execute(FIND_FILES.spec.args(**args), ToolContext(workspace=root))


def test_ripgrep_binary_is_found() -> None:
    rg = find_rg()
    assert rg is not None
    assert subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.startswith("ripgrep 14")


# --- find_files --------------------------------------------------------------------------------

def test_find_files_glob_any_depth_and_anchored(project: Path) -> None:
    assert find(project, pattern="*.py").output.splitlines() == [
        "3 files match '*.py' under .:", "src/app.py", "src/nested/deep.py", "src/util.py"]
    assert find(project, pattern="src/**/*.py").output.splitlines()[1:] == ["src/app.py", "src/nested/deep.py",
                                                                             "src/util.py"]
    assert find(project, pattern="nested/*.py", path="src").output.splitlines()[1:] == ["src/nested/deep.py"]
    assert find(project, pattern="*.{md,yml}").output.splitlines()[1:] == [".github/workflow.yml", "README.md",
                                                                            "docs/guide.md"]


def test_find_files_skips_ignored_and_reports_no_match(project: Path) -> None:
    everything = find(project, pattern="*").output
    for skipped in ("debug.log", "generated/", "node_modules", ".venv", "build/", ".git/"):
        assert skipped not in everything
    none = find(project, pattern="*.rs")
    assert none.ok and none.output.startswith("No files match '*.rs' under .")
    assert not find(project, pattern="*.py", path="README.md").ok
    assert "outside the workspace" in find(project, pattern="*", path="..").output


def test_find_files_caps_at_200_with_a_notice(tmp_path: Path) -> None:
    for i in range(250):
        write(tmp_path, f"many/f{i:03}.txt", "x")
    lines = find(tmp_path, pattern="*.txt").output.splitlines()
    assert lines[0] == "250 files match '*.txt' under .:"
    assert lines[1] == "many/f000.txt" and lines[200] == "many/f199.txt"
    assert lines[-1] == "... 50 more files not shown; narrow the pattern or path."


# --- grep, on both backends --------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_regex_and_ignore_rules(project: Path, backend: str) -> None:
    result = grep(project, backend, pattern="foo")
    # .env (secret), blob.bin (binary), debug.log and generated/ (.gitignore), build/.venv/node_modules: skipped
    assert result.output.splitlines() == [
        "Found 5 matching lines in 5 files.",
        ".github/workflow.yml:1:run: foo",
        "README.md:1:foo project",
        "docs/guide.md:2:Use foo() to start.",
        "src/nested/deep.py:2:foo = FOO + 1",
        "src/util.py:3:    return value  # foo",
    ]
    assert result.meta["matches"] == 5 and result.meta["files"] == 5
    regex = grep(project, backend, pattern=r"def \w+_cache\(")
    assert regex.output.splitlines()[1:] == ["src/app.py:3:def load_cache():"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_fixed_strings_case_glob_and_type(project: Path, backend: str) -> None:
    assert grep(project, backend, pattern="a.b", fixed_strings=True).meta["matches"] == 1
    assert grep(project, backend, pattern="a.b").meta["matches"] == 2  # '.' is any character
    upper = grep(project, backend, pattern="foo", case_insensitive=True)
    assert "src/nested/deep.py:1:FOO = 1" in upper.output and "src/app.py:6:# TODO: Foo later" in upper.output
    only_py = grep(project, backend, pattern="foo", glob="*.py")
    assert only_py.output.splitlines()[1:] == ["src/nested/deep.py:2:foo = FOO + 1", "src/util.py:3:    return value  # foo"]
    no_md = grep(project, backend, pattern="foo", glob="!*.md")
    assert "README.md" not in no_md.output and ".github/workflow.yml:1" in no_md.output
    typed = grep(project, backend, pattern="foo", file_type="md")
    assert typed.output.splitlines()[1:] == ["README.md:1:foo project", "docs/guide.md:2:Use foo() to start."]
    assert grep(project, backend, pattern="foo", file_type="python").meta["matches"] == 2  # alias for py


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_context_and_path(project: Path, backend: str) -> None:
    result = grep(project, backend, pattern="load_cache", context=1, path="src")
    assert result.output.splitlines() == ["Found 1 matching line in 1 file.", "src/app.py-2-",
                                          "src/app.py:3:def load_cache():", "src/app.py-4-    return os.getcwd()"]
    # Naming an ignored directory searches it (its own files are still judged by the rules).
    explicit = grep(project, backend, pattern="foo", path="generated")
    assert explicit.output.splitlines()[1:] == ["generated/out.py:1:foo = 'generated'"]
    one_file = grep(project, backend, pattern="foo|FOO", path="src/nested/deep.py")
    assert one_file.output.splitlines()[1:] == ["src/nested/deep.py:1:FOO = 1", "src/nested/deep.py:2:foo = FOO + 1"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_max_results_notice(tmp_path: Path, backend: str) -> None:
    for name in ("a.txt", "b.txt"):
        write(tmp_path, name, "".join(f"hit {i}\n" for i in range(30)))
    result = grep(tmp_path, backend, pattern="hit", max_results=40)
    lines = result.output.splitlines()
    assert lines[0] == "Found 60 matching lines in 2 files. Showing the first 40."
    assert lines[1] == "a.txt:1:hit 0" and lines[40] == "b.txt:10:hit 9"
    assert lines[-1] == "... 20 more matches not shown; narrow with path, glob or file_type or raise max_results."


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_output_is_capped_in_bytes_and_long_lines_cut(tmp_path: Path, backend: str) -> None:
    write(tmp_path, "wide.txt", "".join(f"hit {i} " + "y" * 300 + "\n" for i in range(100)))
    write(tmp_path, "min.js", "hit" + "z" * 5000 + "\n")
    ctx = ToolContext(workspace=tmp_path, output_cap_bytes=4000, extra={"grep_backend": backend})
    result = GREP.execute(GREP.spec.args(pattern="hit"), ctx)
    lines = result.output.splitlines()
    assert lines[1] == "min.js:1:hit" + "z" * 497 + "… [line cut: 5003 chars]"
    assert len("\n".join(lines[1:-1]).encode()) <= 4000
    assert lines[-1].startswith(f"... {101 - (len(lines) - 2)} more matches not shown (output limit of 4000 bytes")


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_errors(project: Path, backend: str) -> None:
    bad = grep(project, backend, pattern="foo(")
    assert not bad.ok and bad.output.startswith("invalid regex 'foo('")
    assert "newline" in grep(project, backend, pattern="a\nb").output
    assert "binary file" in grep(project, backend, pattern="foo", path="blob.bin").output
    assert "secret file" in grep(project, backend, pattern="foo", path=".env").output
    assert "outside the workspace" in grep(project, backend, pattern="x", path="../").output
    assert grep(project, backend, pattern="zzz_never").output == "No matches for 'zzz_never' in the workspace."


# --- rg and the fallback agree on a generated tree -----------------------------------------------

WORDS = ["foo", "Foo", "FOO", "bar", "lru_cache", "def load_cache(x):", "café", "NAÏVE", "naïve", "ΑΒΓ αβγ",
         "\tindented", "trailing   ", "", "x = {'a': 1}", "foo  bar", "return self.value", "Straße", "ǅemal",
         "\u212aelvin sign", "def Lru_Cache_x():"]


def generate_tree(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    dirs = ["", "src", "src/pkg", "src/pkg/deep", "docs", "tests", ".hidden", "build", "node_modules/m",
            "tmpfiles", "lib/vendor", "a.egg-info", "src/generated", "nested_repo"]
    write(root, ".gitignore", "*.log\n!keep.log\ntmp*/\n/docs/private.md\nsrc/generated/\n# comment\n*.min.js\n")
    write(root, "src/.gitignore", "secret_*.py\n!secret_ok.py\n/pkg/skip_me.py\n")
    write(root, "nested_repo/.gitignore", "*.txt\n")
    (root / "nested_repo" / ".git").mkdir(parents=True)
    names = ["a.py", "b.md", "c.txt", "d.js", "e.log", "keep.log", "secret_x.py", "secret_ok.py", "skip_me.py",
             "f.min.js", "private.md", "g.yaml", "h.rs", "Makefile"]
    for i in range(70):
        rel = f"{rng.choice(dirs)}/{rng.choice(names)}".lstrip("/")
        lines = [rng.choice(WORDS) for _ in range(rng.randint(0, 30))]
        text = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
        data = text.encode()
        if i % 9 == 1:
            data = data.replace(b"\n", b"\r\n")
        if i % 11 == 2:
            data = b"\xef\xbb\xbf" + data
        if i % 13 == 3:
            data += b"bad \xff\xfe bytes foo\n"
        write(root, rel, data)
    write(root, "src/bin.dat", b"foo\x00binary foo\n")
    write(root, "docs/utf16.txt", "foo in utf16\nnaïve\n".encode("utf-16"))
    write(root, "empty.py", b"")
    (root / "src" / "link.py").symlink_to("pkg")  # links are not followed
    (root / "linked_dir").symlink_to("src")


QUERIES: list[dict[str, Any]] = [
    {"pattern": "foo"}, {"pattern": "foo", "case_insensitive": True}, {"pattern": r"def \w+_cache\("},
    {"pattern": "café|naïve"}, {"pattern": "naïve", "case_insensitive": True}, {"pattern": "^$"},
    {"pattern": "zzz_no_match"}, {"pattern": "a': 1", "fixed_strings": True}, {"pattern": r"foo\s*bar"},
    {"pattern": r"o\s+"}, {"pattern": "[^a-z]{3}"}, {"pattern": "foo", "glob": "*.py"},
    {"pattern": "foo", "glob": "!*.md"}, {"pattern": "foo", "glob": "src/**"}, {"pattern": "foo", "glob": "*.{log,txt}"},
    {"pattern": "foo", "file_type": "py"}, {"pattern": "foo", "file_type": "md"}, {"pattern": "bar", "context": 2},
    {"pattern": "foo", "path": "src"}, {"pattern": "foo", "path": "nested_repo"}, {"pattern": "STRASSE|ǆ", "case_insensitive": True},
    {"pattern": "foo", "max_results": 7}, {"pattern": "foo", "context": 1, "max_results": 5},
    {"pattern": "kelvin", "case_insensitive": True}, {"pattern": "(?i)lru_cache"}, {"pattern": r"def \w+_Cache_x\("},
]


@pytest.mark.parametrize("in_git", [True, False], ids=["git-repo", "plain-dir"])
@pytest.mark.parametrize("seed", [1, 2])
def test_rg_and_python_fallback_give_identical_results(tmp_path: Path, seed: int, in_git: bool) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    if in_git:
        git_init(root)
    generate_tree(root, seed)
    total = 0
    for query in QUERIES:
        args = {"max_results": 100_000, **query}
        fast, slow = grep(root, "rg", **args), grep(root, "python", **args)
        assert fast.ok and slow.ok, (query, fast.output, slow.output)
        assert slow.output == fast.output, query
        assert (slow.meta["matches"], slow.meta["files"]) == (fast.meta["matches"], fast.meta["files"]), query
        total += fast.meta["matches"]
    assert total > 200  # the tree really exercised the search
