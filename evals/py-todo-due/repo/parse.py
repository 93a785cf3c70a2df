"""Reading todo.txt lines: "x " marks a done item, "(A) " a priority, +word a project."""

from dataclasses import dataclass, field


@dataclass
class Item:
    text: str
    done: bool = False
    priority: str | None = None
    projects: list[str] = field(default_factory=list)


def parse_line(line):
    line = line.strip()
    done = line.startswith("x ")
    if done:
        line = line[2:]
    priority = None
    if len(line) > 4 and line[0] == "(" and line[2:4] == ") " and line[1].isupper():
        priority, line = line[1], line[4:]
    words = line.split()
    projects = [w[1:] for w in words if w.startswith("+") and len(w) > 1]
    return Item(text=line, done=done, priority=priority, projects=projects)


def parse(text):
    return [parse_line(line) for line in text.splitlines() if line.strip()]
