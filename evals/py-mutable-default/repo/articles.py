"""Blog articles and their tags."""


class Article:
    def __init__(self, title, tags=[]):
        self.title = title
        self.tags = tags

    def __repr__(self):
        return f"Article({self.title!r}, tags={self.tags!r})"


def add_tag(article, tag):
    """Add ``tag`` once; tags keep the order they were added in."""
    if tag not in article.tags:
        article.tags.append(tag)
    return article
