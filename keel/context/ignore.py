"""Which files the search and listing tools skip: .gitignore rules plus always-skipped dirs.

The rules follow ripgrep's reading of .gitignore files, so that the grep tool gives the same
answer whether ripgrep or the in-process fallback runs it:

- .gitignore files count from the nearest enclosing git repository's root down (a nested
  repository starts afresh). Outside any repository every ancestor's .gitignore counts, which
  is what ``rg --no-require-git`` does.
- The deepest .gitignore with a matching pattern decides; inside one file the last match wins.
- A pattern matches a path itself, never "because a parent directory matched": ignored
  directories are pruned during the walk instead. So an explicit search inside an ignored
  directory still sees its files, as with rg.
- Symlinks are never followed while walking (rg without -L), so a link cannot lead a search
  out of the workspace.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pathspec

from keel.policy.beneath import NotRegularFileError, anchor, open_beneath, read_beneath
from keel.policy.listing import DIR, FILE, Entry, list_beneath
from keel.policy.paths import workspace_root

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
# Build output, caches, environments and VCS data: never useful to list or search.
ALWAYS_SKIPPED_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache",
                                 ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", "target"})
ALWAYS_SKIPPED_DIR_SUFFIXES = (".egg-info",)


def is_always_skipped(name: str, is_dir: bool) -> bool:
    if name == ".git":  # a worktree's or submodule's .git is a file
        return True
    return is_dir and (name in ALWAYS_SKIPPED_DIRS or name.endswith(ALWAYS_SKIPPED_DIR_SUFFIXES))


def rg_skip_globs() -> list[str]:
    """The always-skipped set as ripgrep exclude globs (a trailing '/' limits a glob to dirs)."""
    globs = ["!.git"] + [f"!{name}/" for name in sorted(ALWAYS_SKIPPED_DIRS - {".git"})]
    return globs + [f"!*{suffix}/" for suffix in ALWAYS_SKIPPED_DIR_SUFFIXES]


def expand_braces(glob: str) -> list[str]:
    """'*.{ts,tsx}' -> ['*.ts', '*.tsx'] (ripgrep's glob extension; gitignore lacks it)."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", glob)
    if match is None:
        return [glob]
    head, tail = glob[: match.start()], glob[match.end():]
    return [out for alt in match.group(1).split(",") for out in expand_braces(head + alt + tail)]


class GlobMatcher:
    """Gitignore-style patterns; ``match`` says which pattern decides a path, if any."""

    def __init__(self, lines: Iterable[str]):
        spec = pathspec.GitIgnoreSpec.from_lines(list(lines))
        self._patterns = [(p.regex, bool(p.include)) for p in spec.patterns
                          if p.include is not None and p.regex is not None]
        # One alternation answers "does anything match?" for the common no-match case in one call.
        body = "|".join(f"(?:{rx.pattern})" for rx, _ in self._patterns).replace("(?P<ps_d>", "(?:")
        self._any = re.compile(body) if body else None

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def match(self, rel: str, is_dir: bool) -> bool | None:
        """True: an ignore pattern decides; False: a '!' pattern decides; None: no pattern matches.

        ``rel`` is relative to the directory the patterns belong to.
        """
        if self._any is None:
            return None
        path = rel + "/" if is_dir else rel
        if self._any.match(path) is None:
            return None
        for regex, include in reversed(self._patterns):
            found = regex.match(path)
            if found is None:
                continue
            # pathspec also matches descendants of a matching directory; ripgrep does not.
            try:
                dir_end = found.end("ps_d")
            except IndexError:
                dir_end = -1
            if dir_end in (-1, len(path)):
                return include
        return None


Level = tuple[str, GlobMatcher]  # (absolute directory, its .gitignore patterns)


class IgnoreRules:
    """The .gitignore rules of one workspace, read lazily as directories are visited."""

    def __init__(self, workspace: Path):
        self.root = str(workspace_root(workspace))
        chain = [Path(self.root), *Path(self.root).parents]
        # Inside a repository .gitignore applies from its root down, as git and rg (by default) do.
        self.require_git = any((d / ".git").exists() for d in chain)
        self._levels: dict[str, tuple[Level, ...]] = {}
        self._root_fd: int | None = None     # open while a walk is under way
        self._prefix = self.root.rstrip("/") + "/"

    def _read(self, directory: str) -> GlobMatcher | None:
        try:   # no symlink followed: a .gitignore swapped for a link is not read through it
            data = read_beneath(*anchor(os.path.join(directory, ".gitignore")), limit=1 << 20)
        except OSError:
            return None
        matcher = GlobMatcher(data.decode("utf-8", "replace").splitlines())
        return matcher or None

    def levels(self, directory: str, names: Iterable[str] | None = None) -> tuple[Level, ...]:
        """The .gitignore levels that judge entries of ``directory`` (absolute), deepest last.

        ``names`` (the directory's entry names, when already listed) saves two stat calls.
        """
        cached = self._levels.get(directory)
        if cached is not None:
            return cached
        parent = os.path.dirname(directory)
        inherited = self.levels(parent) if parent != directory else ()
        if names is None:
            has_gitignore = os.path.isfile(os.path.join(directory, ".gitignore"))
            has_git = self.require_git and os.path.lexists(os.path.join(directory, ".git"))
        else:
            names = set(names)
            has_gitignore, has_git = ".gitignore" in names, self.require_git and ".git" in names
        if has_git:
            inherited = ()  # a repository root: rules from above it stop here
        matcher = self._read(directory) if has_gitignore else None
        result = (*inherited, (directory, matcher)) if matcher else inherited
        self._levels[directory] = result
        return result

    @staticmethod
    def gitignored(path: str, is_dir: bool, levels: tuple[Level, ...]) -> bool:
        for base, matcher in reversed(levels):
            rel = path[len(base):].lstrip("/")
            decided = matcher.match(rel, is_dir)
            if decided is not None:
                return decided
        return False

    def entries(self, directory: str, *, with_stat: bool = False) -> list[Entry]:
        """The entries of ``directory`` (absolute, at or below the workspace root), listed through a
        descriptor opened with no symlink followed (keel.policy.listing): a directory swapped for a
        link since the walk saw it raises ``EscapeError`` instead of listing where it points."""
        if directory.startswith(self._prefix):       # the walk's own paths: root + "/" + rel (relpath is slow)
            base, rel = self.root, directory[len(self._prefix):]
        else:
            base, rel = anchor(directory, self.root)
        return list_beneath(self._root_fd if self._root_fd is not None else base, rel, directory, with_stat=with_stat)

    def scan(self, directory: str, *, with_stat: bool = False) -> tuple[list[Entry], list[Entry]]:
        """The entries of ``directory`` split into (kept, ignored). Raises OSError if unreadable."""
        entries = self.entries(directory, with_stat=with_stat)
        levels = self.levels(directory, (e.name for e in entries))
        kept, ignored = [], []
        for entry in entries:
            is_dir = entry.is_dir()
            if is_always_skipped(entry.name, is_dir) or (levels and self.gitignored(entry.path, is_dir, levels)):
                ignored.append(entry)
            else:
                kept.append(entry)
        return kept, ignored

    def walk_files(self, start: str, decide: Callable[[Entry, bool], bool | None] | None = None, *,
                   with_stat: bool = False, pruned: Callable[[Entry], None] | None = None,
                   every_file: bool = False) -> Iterator[Entry]:
        """Regular files under ``start`` (absolute dir) that the rules keep; symlinks are skipped, and
        every directory is listed with no link followed (``entries``).

        ``decide(entry, is_dir)`` may settle an entry first: True keeps it, False drops it,
        None leaves it to the rules (how grep's glob filter overrides .gitignore, as in rg).
        ``every_file``: files are kept whatever the rules say, without asking ``decide`` (the shell watch).
        ``with_stat``: each entry carries its lstat. ``pruned(entry)`` hears of each directory the
        walk does not enter (always skipped, decided against, or git-ignored).
        """
        stack = [start]
        # the root's descriptor is opened once for the walk (each folder is still opened below it, no link
        # followed): opening it again per folder cost a tenth of a scan
        own = self._root_fd is None
        if own:
            self._root_fd = os.open(self.root, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            while stack:
                directory = stack.pop()
                try:
                    entries = self.entries(directory, with_stat=with_stat)
                except OSError:
                    continue  # unreadable directories (or ones that became links) are skipped silently, as rg does
                levels = self.levels(directory, (e.name for e in entries))
                for entry in entries:
                    # A symlink is neither a dir nor a file: skipped.
                    kind = entry.kind
                    if kind == DIR:
                        is_dir = True
                        if is_always_skipped(entry.name, True):
                            if pruned is not None:
                                pruned(entry)
                            continue
                    elif kind == FILE:
                        is_dir = False
                        if entry.name == ".git":
                            continue
                        if every_file:
                            yield entry
                            continue
                    else:
                        continue
                    verdict = decide(entry, is_dir) if decide is not None else None
                    if verdict is None and levels and self.gitignored(entry.path, is_dir, levels):
                        verdict = False
                    if verdict is False:
                        if is_dir and pruned is not None:
                            pruned(entry)
                        continue
                    if is_dir:
                        stack.append(entry.path)
                    else:
                        yield entry
        finally:
            if own and self._root_fd is not None:
                os.close(self._root_fd)
                self._root_fd = None


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_SNIFF_BYTES = 65536


def _open_regular(path: str) -> int:
    """A read descriptor of the regular file at the real path ``path``, no symlink followed on the
    way (keel.policy.beneath: the walk hands out real paths, so a link met was swapped in since) and
    never blocking on a FIFO."""
    fd = open_beneath(*anchor(os.path.abspath(path)), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFileError(errno.EINVAL, "not a regular file; not read", path)
    return fd


def read_unless_binary(path: str) -> bytes | None:
    """The file's bytes, or None when it is unreadable or shows a NUL in its first 64 KB (most
    binaries do: they are skipped without reading the rest). os.read, not open(): for tens of
    thousands of small files the file-object setup costs as much as the reading."""
    try:
        fd = _open_regular(path)
    except OSError:
        return None
    try:
        data = os.read(fd, _SNIFF_BYTES)
        if b"\0" in data and data[:2] not in UTF16_BOMS:
            return None
        if len(data) == _SNIFF_BYTES:
            chunks = [data]
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def is_binary_file(path: str) -> bool:
    """True when the file holds a NUL byte anywhere (UTF-16 text with a BOM excepted)."""
    with os.fdopen(_open_regular(path), "rb") as fh:
        chunk = fh.read(_SNIFF_BYTES)
        if chunk[:2] in UTF16_BOMS:
            return False
        while chunk:
            if b"\0" in chunk:
                return True
            chunk = fh.read(1 << 20)
    return False


def decode_like_rg(data: bytes) -> tuple[str, bool] | None:
    """Text the way rg sees it, and whether it holds bytes that are not UTF-8. UTF-16 with a BOM
    is transcoded, a UTF-8 BOM dropped, a NUL byte means binary (None). Bytes that are not
    UTF-8 become lone surrogates (surrogateescape), which ``search_text`` keeps matches off."""
    if data[:2] in UTF16_BOMS:
        return data.decode("utf-16", "replace"), False
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").removeprefix("\ufeff"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape").removeprefix("\ufeff"), True


# A subset of ripgrep's --type-list (same globs), for the fallback; rg itself knows many more.
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"), "js": ("*.cjs", "*.js", "*.jsx", "*.mjs", "*.vue"), "ts": ("*.cts", "*.mts", "*.ts", "*.tsx"),
    "rust": ("*.rs",), "go": ("*.go",), "java": ("*.java", "*.jsp", "*.jspx", "*.properties"),
    "c": ("*.[chH]", "*.[chH].in", "*.cats"), "h": ("*.h", "*.hh", "*.hpp"),
    "cpp": ("*.[ChH]", "*.[ChH].in", "*.[ch]pp", "*.[ch]pp.in", "*.[ch]xx", "*.[ch]xx.in", "*.cc", "*.cc.in", "*.hh",
            "*.hh.in", "*.inl"),
    "md": ("*.markdown", "*.md", "*.mdown", "*.mdwn", "*.mdx", "*.mkd", "*.mkdn"), "json": ("*.json", "*.sarif", "composer.lock"),
    "yaml": ("*.yaml", "*.yml"), "toml": ("*.toml", "Cargo.lock"), "html": ("*.ejs", "*.htm", "*.html"),
    "css": ("*.css", "*.scss"), "sh": ("*.bash", "*.bashrc", "*.csh", "*.cshrc", "*.ksh", "*.kshrc", "*.sh", "*.tcsh", "*.zsh"),
    "ruby": ("*.gemspec", "*.rb", "*.rbw", ".irbrc", "Gemfile", "Rakefile", "config.ru"), "php": ("*.php", "*.phtml"),
    "kotlin": ("*.kt", "*.kts"), "swift": ("*.swift",), "cs": ("*.cs",), "scala": ("*.sbt", "*.scala"),
    "sql": ("*.psql", "*.sql"), "xml": ("*.dtd", "*.rng", "*.sch", "*.xhtml", "*.xjb", "*.xml", "*.xml.dist", "*.xsd", "*.xsl", "*.xslt"),
    "txt": ("*.txt",), "lua": ("*.lua",), "vue": ("*.vue",), "svelte": ("*.svelte",), "protobuf": ("*.proto",),
    "docker": ("*Dockerfile*",), "make": ("*.mak", "*.mk", "[Gg][Nn][Uu]makefile", "[Mm]akefile", "[Mm]akefile.am", "[Mm]akefile.in"),
}
# Names models often use for a type, mapped to ripgrep's.
TYPE_ALIASES = {"python": "py", "javascript": "js", "typescript": "ts", "rs": "rust", "golang": "go", "c++": "cpp",
                "yml": "yaml", "markdown": "md", "shell": "sh", "bash": "sh", "rb": "ruby", "kt": "kotlin",
                "proto": "protobuf", "csharp": "cs"}


def fnmatch_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pat) for pat in patterns)
