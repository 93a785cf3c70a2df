"""Printing the list: open items first by priority, then done ones."""

import datetime

from parse import parse


def render_item(item, today):
    box = "[x]" if item.done else "[ ]"
    prio = f"({item.priority}) " if item.priority else ""
    due = ""
    if item.due is not None:
        late = not item.done and item.due < today
        due = f" (overdue since {item.due})" if late else f" (due {item.due})"
    return f"{box} {prio}{item.text}{due}"


def render(text, today=None):
    today = today or datetime.date.today()
    items = parse(text)
    items.sort(key=lambda i: (i.done, i.priority or "Z"))
    return "\n".join(render_item(i, today) for i in items)
