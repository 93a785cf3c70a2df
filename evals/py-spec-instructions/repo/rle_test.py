import pytest

from rle import decode, encode


def test_encode_the_example():
    assert encode("WWWWWWWWWWWWBWWWWWWWWWWWWBBBWWWWWWWWWWWWWWWWWWWWWWWWB") == "12WB12W3B24WB"


def test_single_characters_have_no_count():
    assert encode("XYZ") == "XYZ"


def test_spaces_and_lowercase():
    assert encode("  hsqq qww  ") == "2 hs2q q2w2 "


def test_empty():
    assert encode("") == "" and decode("") == ""


def test_decode():
    assert decode("12WB12W3B24WB") == "WWWWWWWWWWWWBWWWWWWWWWWWWBBBWWWWWWWWWWWWWWWWWWWWWWWWB"


def test_digits_cannot_be_encoded():
    with pytest.raises(ValueError):
        encode("a1")
