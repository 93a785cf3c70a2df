"""Printing the list: open items first by priority, then done ones."""

from parse import parse


def render_item(item):
    box = "[x]" if item.done else "[ ]"
    prio = f"({item.priority}) " if item.priority else ""
    return f"{box} {prio}{item.text}"


def render(text):
    items = parse(text)
    items.sort(key=lambda i: (i.done, i.priority or "Z"))
    return "\n".join(render_item(i) for i in items)
