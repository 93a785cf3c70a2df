"""Text files read and written without disturbing the bytes an edit did not touch.

A file is decoded once into ``raw`` (its characters with the original line endings). Editing code
works on ``text``, a view where every line ending is ``\\n``; offsets in that view are mapped back
onto ``raw`` so only the replaced span changes. New text gets the file's dominant line ending, and
the BOM, encoding and final-newline state are kept. Decoding then encoding is exact for every
encoding used here, so bytes outside the edited span come back identical.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from functools import cached_property
from pathlib import Path

from keel.policy.beneath import anchor, read_beneath, write_beneath_atomic

# Longest BOM first: the UTF-32-LE BOM starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# The same line breaks Python's universal-newlines mode recognises (not str.splitlines' extras).
_EOL = re.compile(r"\r\n|\r|\n")
_EOL_NAMES = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}


class TextFileError(Exception):
    """The file cannot be edited as text; the message is shown to the model as is."""


@dataclass(frozen=True)
class TextFile:
    raw: str                  # decoded characters, original line endings, no BOM
    encoding: str             # codec used for raw (without BOM handling)
    bom: bytes = b""
    newline: str = "\n"       # dominant line ending, used for text the edit inserts
    latin1_fallback: bool = False   # the bytes were not valid UTF-8 and hold no UTF-8 character at all
    stray_bytes: bool = False       # UTF-8 with some invalid bytes, kept in raw as surrogate escapes

    @classmethod
    def from_bytes(cls, data: bytes) -> TextFile:
        for bom, encoding in _BOMS:
            if data.startswith(bom):
                try:
                    raw = data[len(bom):].decode(encoding)
                except UnicodeDecodeError as e:
                    raise TextFileError(f"the file starts with a {encoding} byte-order mark but is not valid "
                                        f"{encoding} ({e.reason} at byte {e.start + len(bom)})") from None
                return cls(raw, encoding, bom, dominant_newline(raw))
        if b"\x00" in data:
            raise TextFileError("the file looks binary (it contains NUL bytes); edit_file only edits text")
        raw, encoding = decode_lenient(data)
        return cls(raw, encoding, b"", dominant_newline(raw), latin1_fallback=encoding == "latin-1",
                   stray_bytes=encoding == "utf-8" and _has_stray(raw))

    @cached_property
    def text(self) -> str:
        """The LF view that matching works on: what read_file shows (stray bytes as latin-1)."""
        return shown_text(_EOL.sub("\n", self.raw))

    @property
    def final_newline(self) -> bool:
        return self.raw.endswith(("\n", "\r"))

    @property
    def description(self) -> str:
        enc = f"{self.encoding}{' with BOM' if self.bom else ''}"
        return f"{enc}, {_EOL_NAMES[self.newline]} line endings"

    @cached_property
    def _line_table(self) -> tuple[list[int], list[int]]:
        """Start offset of every line in the LF view and in raw (same index, same line)."""
        lf_starts, raw_starts = [0], [0]
        for m in _EOL.finditer(self.raw):
            content_len = m.start() - raw_starts[-1]
            lf_starts.append(lf_starts[-1] + content_len + 1)
            raw_starts.append(m.end())
        return lf_starts, raw_starts

    def raw_offset(self, offset: int) -> int:
        """Map an offset in ``text`` to the same place in ``raw``."""
        if not 0 <= offset <= len(self.text):
            raise ValueError(f"offset {offset} outside the text (length {len(self.text)})")
        lf_starts, raw_starts = self._line_table
        i = bisect_right(lf_starts, offset) - 1
        return raw_starts[i] + (offset - lf_starts[i])

    def with_replacements(self, spans: Iterable[tuple[int, int, str]]) -> TextFile:
        """Replace ``text[start:end]`` by each LF-view replacement; spans must not overlap."""
        pieces: list[str] = []
        cursor = 0
        for start, end, new in sorted(spans, key=lambda s: (s[0], s[1])):
            raw_start, raw_end = self.raw_offset(start), self.raw_offset(end)
            if raw_start < cursor or end < start:
                raise ValueError("overlapping or inverted replacement spans")
            pieces.append(self.raw[cursor:raw_start])
            if self.stray_bytes:
                new = _keep_stray(self.raw[raw_start:raw_end], new)
            pieces.append(_EOL.sub(self.newline, new))
            cursor = raw_end
        pieces.append(self.raw[cursor:])
        raw = "".join(pieces)
        # Models routinely drop the last newline of new_text; a file that ended with one keeps it.
        if self.final_newline and raw and not raw.endswith(("\n", "\r")):
            raw += self.newline
        return replace(self, raw=raw)

    def to_bytes(self) -> bytes:
        try:
            return self.bom + self.raw.encode(self.encoding, "surrogateescape" if self.stray_bytes else "strict")
        except UnicodeEncodeError as e:
            bad = self.raw[e.start:e.end]
            raise TextFileError(f"the file is stored as {self.encoding}, which cannot hold {bad!r} from "
                                f"the new text; use characters {self.encoding} can store") from None


# Stray (invalid UTF-8) bytes 0x80-0xFF decode to surrogate escapes U+DC80-U+DCFF; they are shown
# as the latin-1 character of the byte, one character each, so offsets are the same in both.
_STRAY_TO_SHOWN = {0xDC80 + b: 0x80 + b for b in range(128)}
_STRAY = re.compile("[\udc80-\udcff]")


def decode_lenient(data: bytes) -> tuple[str, str]:
    """Bytes without a BOM as read_file shows them and edit_file matches them: (raw, encoding).

    Valid UTF-8 is UTF-8. Bytes with no valid multi-byte UTF-8 sequence at all are a legacy 8-bit
    file, read as latin-1 (every byte one character, exact round trip). UTF-8 with a few invalid
    bytes keeps them as surrogate escapes (exact round trip); ``shown_text`` displays them."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    raw = data.decode("utf-8", "surrogateescape")
    if all(ord(c) < 0x80 or 0xDC80 <= ord(c) <= 0xDCFF for c in raw):
        return data.decode("latin-1"), "latin-1"
    return raw, "utf-8"


def shown_text(raw: str) -> str:
    """``raw`` with each stray byte shown as its latin-1 character."""
    return raw.translate(_STRAY_TO_SHOWN)


def _has_stray(raw: str) -> bool:
    return _STRAY.search(raw) is not None


def _keep_stray(old_raw: str, new: str) -> str:
    """new text with the stray bytes of the span it replaces put back where new_text kept the text
    around them, so a line copied from read_file and left unchanged keeps its original bytes."""
    if not _has_stray(old_raw):
        return new
    old_shown = _EOL.sub("\n", old_raw)
    chars = list(new)
    for tag, i1, i2, j1, _ in SequenceMatcher(None, shown_text(old_shown), new, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                if _STRAY.match(old_shown[i1 + k]):
                    chars[j1 + k] = old_shown[i1 + k]
    return "".join(chars)


def dominant_newline(raw: str) -> str:
    crlf = raw.count("\r\n")
    lf = raw.count("\n") - crlf
    cr = raw.count("\r") - crlf
    best = max((lf, "\n"), (crlf, "\r\n"), (cr, "\r"), key=lambda c: c[0])
    return best[1] if best[0] else "\n"


def read_text_file(path: Path, root: Path | None = None) -> tuple[TextFile, bytes]:
    """The decoded file and the exact bytes it was decoded from. ``path`` is a real path (the jail's
    answer), read below ``root`` (default '/') with no symlink followed: one swapped in is refused."""
    data = read_beneath(*anchor(path, root))
    return TextFile.from_bytes(data), data


def write_workspace_file(path: Path, data: bytes, root: Path | None = None, *, mode: int | None = None,
                         make_parents: bool = False) -> None:
    """Replace the real path ``path`` with ``data`` in one step (keel's one atomic write, keel.core.files:
    temp file, fsync, rename, directory fsync), ``mode`` None keeping its permission bits, so a crash
    never leaves a half-written file; never through a symlink (keel.policy.beneath)."""
    write_beneath_atomic(*anchor(path, root), data, mode, make_parents=make_parents)
