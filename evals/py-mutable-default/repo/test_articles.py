from articles import Article, add_tag


def test_tags_are_added_once():
    article = add_tag(add_tag(Article("a"), "python"), "python")
    assert article.tags == ["python"]


def test_new_articles_start_without_tags():
    add_tag(Article("first"), "news")
    assert Article("second").tags == []


def test_given_tags_are_kept():
    assert Article("c", tags=["x", "y"]).tags == ["x", "y"]
