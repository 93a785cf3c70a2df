"""Reading todo.txt lines: "x " marks a done item, "(A) " a priority, +word a project,
due:YYYY-MM-DD a due date."""

import datetime
from dataclasses import dataclass, field


@dataclass
class Item:
    text: str
    done: bool = False
    priority: str | None = None
    projects: list[str] = field(default_factory=list)
    due: datetime.date | None = None


def parse_line(line):
    line = line.strip()
    done = line.startswith("x ")
    if done:
        line = line[2:]
    priority = None
    if len(line) > 4 and line[0] == "(" and line[2:4] == ") " and line[1].isupper():
        priority, line = line[1], line[4:]
    words, due = [], None
    for word in line.split():
        if word.startswith("due:"):
            try:
                due = datetime.date.fromisoformat(word[4:])
                continue
            except ValueError:
                pass
        words.append(word)
    projects = [w[1:] for w in words if w.startswith("+") and len(w) > 1]
    return Item(text=" ".join(words), done=done, priority=priority, projects=projects, due=due)


def parse(text):
    return [parse_line(line) for line in text.splitlines() if line.strip()]
