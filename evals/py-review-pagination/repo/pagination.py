def paginate(items, page, per_page):
    """Return the items on page `page`. Page numbers start at 1."""
    start = page * per_page
    return items[start:start + per_page]


def page_count(items, per_page):
    """How many pages `items` fill."""
    return (len(items) + per_page - 1) // per_page
