from wordfreq import top_words


def test_top_words():
    assert top_words("the cat and the hat", 1) == [("the", 2)]
