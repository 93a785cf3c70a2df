"""The workspace path jail, on real directories, symlinks and /proc."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keel.policy.paths import PathJailError, display_path, is_secret_path, resolve_in_workspace


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/ws (the workspace) next to tmp/outside and tmp/ws-evil."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("x = 1\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil" / "x.txt").write_text("evil\n")
    return ws


def refused(ws: Path, path: str, *, for_write: bool = False) -> str:
    with pytest.raises(PathJailError) as info:
        resolve_in_workspace(ws, path, for_write=for_write)
    return str(info.value)


def test_plain_paths_resolve_inside(tree: Path) -> None:
    ws = tree.resolve()
    assert resolve_in_workspace(tree, "src/app.py") == ws / "src" / "app.py"
    assert resolve_in_workspace(tree, "./src/../src/app.py") == ws / "src" / "app.py"
    assert resolve_in_workspace(tree, "new/dir/file.py", for_write=True) == ws / "new" / "dir" / "file.py"
    assert resolve_in_workspace(tree, str(ws / "src" / "app.py")) == ws / "src" / "app.py"
    assert resolve_in_workspace(tree, "src/") == ws / "src"
    assert resolve_in_workspace(tree, ".") == ws


@pytest.mark.parametrize("path", ["../outside/secret.txt", "src/../../outside/secret.txt", "..", "../ws-evil/x.txt"])
def test_dotdot_escapes_are_refused(tree: Path, path: str) -> None:
    assert "outside the workspace" in refused(tree, path)
    assert "outside the workspace" in refused(tree, path, for_write=True)


def test_absolute_paths_outside_and_prefix_confusion_are_refused(tree: Path) -> None:
    assert "outside the workspace" in refused(tree, "/etc/passwd")
    # A sibling whose name merely starts with the workspace's name is not inside it.
    assert "outside the workspace" in refused(tree, str(tree.parent / "ws-evil" / "x.txt"))
    assert "outside the workspace" in refused(tree, str(tree) + "-evil/x.txt", for_write=True)


@pytest.mark.parametrize("path", ["~", "~/.ssh/id_rsa", "~root/x"])
def test_home_paths_are_refused(tree: Path, path: str) -> None:
    assert "'~'" in refused(tree, path)


def test_nul_and_empty_paths_are_refused(tree: Path) -> None:
    assert "NUL" in refused(tree, "src/app.py\x00.txt")
    assert "non-empty" in refused(tree, "")
    assert "non-empty" in refused(tree, "   ")


def test_symlink_escapes_are_refused(tree: Path) -> None:
    outside = tree.parent / "outside"
    (tree / "file_link").symlink_to(outside / "secret.txt")
    (tree / "dir_link").symlink_to(outside)
    (tree / "src" / "rel_link").symlink_to("../../outside")
    for path in ("file_link", "dir_link/secret.txt", "src/rel_link/secret.txt", "dir_link/new.txt"):
        assert "outside the workspace" in refused(tree, path)
        assert "outside the workspace" in refused(tree, path, for_write=True)


def test_dangling_symlink_pointing_out_is_refused_and_writes_nothing(tree: Path) -> None:
    target = tree.parent / "outside" / "created-by-write.txt"
    (tree / "dangling").symlink_to(target)
    assert "outside the workspace" in refused(tree, "dangling", for_write=True)
    assert not target.exists()


def test_symlinks_inside_resolve_to_their_real_target(tree: Path) -> None:
    (tree / "alias.py").symlink_to("src/app.py")
    (tree / "later.py").symlink_to("src/not-yet.py")  # dangling, but pointing inside
    assert resolve_in_workspace(tree, "alias.py") == tree.resolve() / "src" / "app.py"
    assert resolve_in_workspace(tree, "later.py", for_write=True) == tree.resolve() / "src" / "not-yet.py"


def test_symlink_loops_are_refused_with_a_clear_message(tree: Path) -> None:
    (tree / "a").symlink_to("b")
    (tree / "b").symlink_to("a")
    (tree / "self").symlink_to("self/x")
    assert "symlink loop" in refused(tree, "a/file.txt")
    assert "symlink loop" in refused(tree, "self", for_write=True)


def test_proc_self_root_is_judged_by_where_it_leads(tree: Path) -> None:
    assert "outside the workspace" in refused(tree, "/proc/self/root/etc/passwd")
    assert "outside the workspace" in refused(tree, f"/proc/self/root{tree.parent}/outside/secret.txt")
    inside = resolve_in_workspace(tree, f"/proc/self/root{tree.resolve()}/src/app.py")
    assert inside == tree.resolve() / "src" / "app.py"
    assert "outside the workspace" in refused(tree, "/proc/self/cwd/../../etc/passwd")


def test_workspace_given_through_a_symlink(tree: Path) -> None:
    link = tree.parent / "ws-link"
    link.symlink_to(tree)
    assert resolve_in_workspace(link, "src/app.py") == tree.resolve() / "src" / "app.py"
    assert "outside the workspace" in refused(link, "../outside/secret.txt")
    assert display_path(link, tree.resolve() / "src" / "app.py") == "src/app.py"


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", ".GIT/config", "src/.git/HEAD",
                                  ".g\u200cit/config", ".git./config", "git~1/config"])
def test_writing_git_internals_is_refused(tree: Path, path: str) -> None:
    assert ".git" in refused(tree, path, for_write=True)


def test_git_internals_reached_through_a_symlink_are_refused_for_write(tree: Path) -> None:
    (tree / "meta").symlink_to(".git")
    assert ".git" in refused(tree, "meta/config", for_write=True)
    assert resolve_in_workspace(tree, "meta/config") == tree.resolve() / ".git" / "config"  # reading is fine


def test_trailing_slash_and_workspace_root_are_not_writable_files(tree: Path) -> None:
    assert "directory" in refused(tree, "src/app.py/", for_write=True)
    assert "workspace directory itself" in refused(tree, ".", for_write=True)


def test_unicode_names_work(tree: Path) -> None:
    (tree / "données").mkdir()
    (tree / "données" / "日本.txt").write_text("ok\n")
    got = resolve_in_workspace(tree, "données/日本.txt")
    assert got.read_text() == "ok\n"
    assert display_path(tree, got) == "données/日本.txt"


@pytest.mark.parametrize(("name", "secret"), [(".env", True), (".env.production", True), ("server.pem", True),
                                              ("id_rsa", True), ("ID_RSA", True), (".env.example", False),
                                              ("id_rsa.pub", False), ("config", False), ("notes.txt", False)])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_path(Path("/ws") / name) is secret


def test_files_in_ssh_dirs_are_secret() -> None:
    assert is_secret_path(Path("/ws/.ssh/config"))


# --- property: nothing resolves outside, and whatever the kernel would open outside is refused ---

SEGMENTS = ["..", ".", "a", "b", "f.txt", "l1", "l2", "l3", "missing", "a/l1"]
LINK_TARGETS = ["..", "../..", "../../outside", "../outside/secret.txt", "/", "a", "b/f.txt", "missing/x",
                "l1", "l2", "l3", "../ws-evil", "@outside", "@ws", "@proc-out", "@proc-in", "."]


def _kernel_real(path: str) -> tuple[str | None, int]:
    """Where the kernel resolves ``path`` (None and the errno if it cannot open it)."""
    try:
        fd = os.open(path, os.O_PATH)
    except OSError as exc:
        return None, exc.errno or 0
    try:
        return os.readlink(f"/proc/self/fd/{fd}"), 0
    finally:
        os.close(fd)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(links=st.lists(st.tuples(st.sampled_from(["l1", "l2", "l3", "a/l1", "b/l2"]), st.sampled_from(LINK_TARGETS)),
                      max_size=5),
       parts=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=8),
       absolute=st.booleans(), for_write=st.booleans())
def test_property_resolution_never_escapes(links: list[tuple[str, str]], parts: list[str], absolute: bool,
                                           for_write: bool) -> None:
    base = Path(tempfile.mkdtemp(prefix="jail-"))
    try:
        ws = base / "ws"
        (ws / "a").mkdir(parents=True)
        (ws / "b").mkdir()
        (ws / "b" / "f.txt").write_text("in\n")
        (base / "outside").mkdir()
        (base / "outside" / "secret.txt").write_text("out\n")
        (base / "ws-evil").mkdir()
        special = {"@outside": str(base / "outside"), "@ws": str(ws),
                   "@proc-out": f"/proc/self/root{base}/outside", "@proc-in": f"/proc/self/root{ws}/a"}
        for where, target in links:
            link = ws / where
            if not os.path.lexists(link):
                link.symlink_to(special.get(target, target))
        rel = "/".join(parts)
        path = f"{ws}/{rel}" if absolute else rel
        root = os.path.realpath(ws)
        try:
            got = resolve_in_workspace(ws, path, for_write=for_write)
        except PathJailError:
            got = None
        if got is not None:
            assert got.parts[: len(Path(root).parts)] == Path(root).parts, f"{path!r} resolved outside: {got}"
            # Whatever exists of the answer is already canonical: a file created there stays inside.
            existing = got
            while not os.path.lexists(existing):
                existing = existing.parent
            assert os.path.realpath(existing) == str(existing)
        real, err = _kernel_real(f"{ws}/{rel}")
        if real is not None:
            inside = real == root or real.startswith(root + "/")
            if not inside:
                assert got is None, f"kernel opens {real} outside the workspace for {path!r}, jail allowed {got}"
            elif got is not None:
                assert str(got) == real
        else:
            assert err in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- a path that differs only in case (issue 36: the 1.5B read instructions.md for INSTRUCTIONS.md, was
# told "File not found", then created a second instructions.md instead of changing the module) -----------
def test_a_name_differing_only_in_case_resolves_to_the_existing_file(tree: Path) -> None:
    ws = tree.resolve()
    (ws / "INSTRUCTIONS.md").write_text("spec\n")
    assert resolve_in_workspace(ws, "instructions.md") == ws / "INSTRUCTIONS.md"
    assert resolve_in_workspace(ws, "SRC/App.py", for_write=True) == ws / "src" / "app.py"
    assert resolve_in_workspace(ws, "Src/new.py", for_write=True) == ws / "src" / "new.py"   # a new file, its folder found
    assert resolve_in_workspace(ws, "other/new.py", for_write=True) == ws / "other" / "new.py"
    assert "inside .git" in refused(ws, ".GIT/config", for_write=True)
    from keel.tools.base import ToolContext
    from keel.tools.files import READ_FILE

    read = READ_FILE.execute(READ_FILE.spec.args(path="instructions.md"), ToolContext(workspace=ws))
    assert read.ok and "spec" in read.output


def test_two_files_that_match_but_for_case_are_left_for_the_error_to_name(tree: Path, tmp_path: Path) -> None:
    from keel.tools.base import ToolContext
    from keel.tools.files import READ_FILE

    ws = tree.resolve()
    (ws / "Readme.md").write_text("a\n")
    (ws / "README.md").write_text("b\n")
    assert resolve_in_workspace(ws, "readme.md") == ws / "readme.md"
    result = READ_FILE.execute(READ_FILE.spec.args(path="readme.md"), ToolContext(workspace=ws))
    assert not result.ok and "README.md" in result.output and "Readme.md" in result.output


def test_the_case_match_is_judged_by_the_jail_like_any_path(tree: Path) -> None:
    ws = tree.resolve()
    (ws / "Escape").symlink_to(tree.parent / "outside")
    assert "outside the workspace" in refused(ws, "escape/secret.txt")
    with open(tree.parent / "outside" / "secret.txt") as fh:   # the control: the link does lead out
        assert fh.read() == "top secret\n"


# -- a pytest test id copied from a failure (issue 36: the 1.5B read test_money.py::test_thousands_separator,
# was told "File not found", and claimed) -----------------------------------------------------------------
def test_a_pytest_test_id_reads_its_file_and_is_judged_like_any_path(tree: Path) -> None:
    from keel.tools.base import ToolContext
    from keel.tools.files import READ_FILE

    ws = tree.resolve()
    (ws / "test_money.py").write_text("def test_cents():\n    assert True\n")
    ctx = ToolContext(workspace=ws)
    read = READ_FILE.execute(READ_FILE.spec.args(path="test_money.py::test_cents"), ctx)
    assert read.ok and read.output.startswith("(test_money.py::test_cents is a pytest test id; its file:)")
    assert "def test_cents():" in read.output
    missing = READ_FILE.execute(READ_FILE.spec.args(path="test_other.py::test_cents"), ctx)
    assert not missing.ok and "File not found: test_other.py::test_cents" in missing.output
    (ws / "Escape").symlink_to(tree.parent / "outside")
    out = READ_FILE.execute(READ_FILE.spec.args(path="escape/secret.txt::x"), ctx)
    assert not out.ok and "top secret" not in out.output   # the file part goes through the jail too


def test_a_path_outside_naming_a_file_at_the_workspace_top_is_refused_with_the_path_to_use(tree: Path) -> None:
    """Exercism sum-of-multiples: the 1.5B wrote the workspace's absolute path without its last folder,
    three times, and the run ended on repetition. The refusal stays; it names the file inside."""
    (tree / "sum_of_multiples.py").write_text("def sum_of_multiples(limit, factors):\n    pass\n")
    (tree.parent / "sum_of_multiples.py").write_text("outside\n")   # even when one exists there: still refused
    for path in (str(tree.parent / "sum_of_multiples.py"), "../sum_of_multiples.py"):
        message = refused(tree, path, for_write=True)
        assert "outside the workspace" in message
        assert message.endswith("; the workspace has sum_of_multiples.py: use the path sum_of_multiples.py")
    # nothing of that name at the top: the plain refusal, which says nothing about the outside
    assert refused(tree, str(tree.parent / "outside" / "secret.txt")).endswith(f"outside the workspace {tree.resolve()}")
    (tree / "link.py").symlink_to(tree.parent / "outside" / "secret.txt")
    assert "use the path" not in refused(tree, str(tree.parent / "link.py"))


def test_a_path_outside_whose_name_differs_in_case_or_dashes_from_one_file_at_the_top_gets_its_name(
        tree: Path) -> None:
    """Exercism pythagorean-triplet: the 1.5B wrote the folder's hyphenated name with ".py" four times
    (the file is pythagorean_triplet.py), and the run ended on repetition at 83 s."""
    (tree / "pythagorean_triplet.py").write_text("def triplets_with_sum(number):\n    pass\n")
    message = refused(tree, str(tree.parent / "pythagorean-triplet.py"), for_write=True)
    assert message.endswith("; the workspace has pythagorean_triplet.py: use the path pythagorean_triplet.py")
    assert refused(tree, "../Pythagorean-Triplet.py").endswith("use the path pythagorean_triplet.py")
    # two files that match so: no guess; a secret-looking or hidden one is never named
    (tree / "Pythagorean_Triplet.py").write_text("x = 1\n")
    assert "use the path" not in refused(tree, str(tree.parent / "pythagorean-triplet.py"))
    (tree / "prod-secrets.env").write_text("TOKEN=1\n")
    (tree / ".hidden-notes").write_text("x\n")
    for name in ("prod_secrets.env", ".hidden_notes"):
        assert "use the path" not in refused(tree, str(tree.parent / name)), name
