import io

from cli import main
from service import top_words

TEXT = "The cat and the dog. The cat sat on a mat; a dog ran to the big old barn by the river."


def run(tmp_path, *args):
    path = tmp_path / "story.txt"
    path.write_text(TEXT)
    out = io.StringIO()
    assert main([str(path), *args], out=out) == 0
    return out.getvalue().splitlines()


def test_top_words():
    assert top_words(TEXT, 3) == [("the", 5), ("a", 2), ("cat", 2)]


def test_cli_default(tmp_path):
    assert run(tmp_path) == ["   5 the", "   2 a", "   2 cat"]


def test_min_length_skips_short_words():
    assert top_words(TEXT, 3, min_length=4) == [("barn", 1), ("river", 1)]
    assert top_words(TEXT, 2, min_length=3) == [("the", 5), ("cat", 2)]


def test_cli_min_length(tmp_path):
    assert run(tmp_path, "--min-length", "3", "-n", "4") == ["   5 the", "   2 cat", "   2 dog", "   1 and"]
