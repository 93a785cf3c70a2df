from text import pad, truncate


def test_short_text_is_untouched():
    assert truncate("hello", 10) == "hello"


def test_default_suffix():
    assert truncate("hello world", 8) == "hello..."


def test_custom_suffix():
    assert truncate("hello world", 8, suffix="\u2026") == "hello w\u2026"


def test_empty_suffix():
    assert truncate("hello world", 5, suffix="") == "hello"


def test_pad():
    assert pad("hi", 4) == "hi  "
