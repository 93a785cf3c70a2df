"""Skills: folders with a ``SKILL.md`` whose front matter names and describes them.

Found in the project (``.keel/skills/<name>/SKILL.md``, ``.claude/skills/<name>/SKILL.md``) and the
user's config (``~/.config/keel/skills/<name>/SKILL.md``); a project skill shadows a user skill of
the same name. Only the names and descriptions go into the system prompt (sorted, so the prefix is
byte-stable between runs); the ``skill`` tool loads one skill's instructions when the model needs
them. A skill is text for the model — it runs nothing by itself, so project skills need no trust.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec

SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DESCRIPTION_CAP = 400
BODY_CAP = 30_000


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path          # the SKILL.md
    source: str         # "project" or "user"


def user_skills_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "keel" / "skills"


def skill_dirs(workspace: Path) -> list[tuple[Path, str]]:
    return [(workspace / ".keel" / "skills", "project"), (workspace / ".claude" / "skills", "project"),
            (user_skills_dir(), "user")]


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``---`` delimited ``key: value`` lines (quotes stripped, folded ``>``/``|`` values joined)
    and the body after them. Not a YAML parser: SKILL.md front matter is flat."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return {}, text
    meta: dict[str, str] = {}
    key = None
    for line in lines[1:end]:
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if m and not line[0].isspace():
            key, value = m.group(1), m.group(2).strip()
            meta[key] = "" if value in (">", "|", ">-", "|-") else value.strip("\"'")
        elif key is not None and line.strip():
            meta[key] = (meta[key] + " " + line.strip()).strip()
    return meta, "\n".join(lines[end + 1:]).strip()


def discover_skills(workspace: Path) -> tuple[list[Skill], list[str]]:
    """Every valid skill (project before user), and warnings for the ones that could not be used."""
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    for root, source in skill_dirs(workspace):
        try:
            folders = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue
        for folder in folders:
            path = folder / SKILL_FILE
            if source == "project" and not folder.resolve().is_relative_to(workspace.resolve()):
                warnings.append(f"skill {folder}: links outside the project; skipped")
                continue  # a cloned repository must not point the skill tool at files of this machine
            try:
                meta, _body = parse_front_matter(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
            name, description = meta.get("name", folder.name).strip(), meta.get("description", "").strip()
            if not _NAME.match(name) or not description:
                warnings.append(f"skill {path}: needs front matter with a name (letters, digits, . _ -) and a "
                                "description; skipped")
                continue
            if name not in found:
                found[name] = Skill(name, description[:DESCRIPTION_CAP], path, source)
    return sorted(found.values(), key=lambda s: s.name), warnings


def skills_prompt(skills: list[Skill]) -> str:
    lines = [f"- {s.name}: {' '.join(s.description.split())}" for s in skills]
    return ("\n\nSkills (instructions for particular kinds of work; when the task matches one, load it with the "
            "skill tool before you start):\n" + "\n".join(lines) + "\n")


class SkillArgs(ToolArgs):
    name: str = Field(min_length=1, description="The skill's name, as listed in the system prompt.")
    file: str | None = Field(default=None, description="A file of the skill (as listed when it was loaded) to "
                                                       "read instead of its SKILL.md.")


def make_skill_tool(skills: list[Skill]) -> Tool:
    by_name = {s.name: s for s in skills}

    def run(args: SkillArgs, ctx: ToolContext) -> ToolResult:
        skill = by_name.get(args.name.strip())
        if skill is None:
            return ToolResult.error(f"No skill named {args.name!r}. Skills: {', '.join(by_name)}.")
        try:
            _meta, body = parse_front_matter(skill.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return ToolResult.error(f"Skill {skill.name} could not be read: {exc}")
        folder = skill.path.parent
        if args.file is not None:
            return _skill_file(skill, folder, args.file)
        others = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                        if p.is_file() and p != skill.path)[:50]
        where = _shown(folder, ctx.workspace)
        files = ("\n\nFiles in this skill (read one with skill(name, file=...)): " + ", ".join(others)) \
            if others else ""
        return ToolResult(ok=True, output=f"Skill {skill.name} ({where}):\n\n{body[:BODY_CAP]}{files}")

    names = ", ".join(by_name)
    return Tool(ToolSpec("skill", f"Load a skill's full instructions by name. Available: {names}.", SkillArgs,
                         ToolAnnotations(read_only=True, idempotent=True)), run)


def _skill_file(skill: Skill, folder: Path, name: str) -> ToolResult:
    """One file of the skill's folder (user skills live outside the workspace, where read_file cannot go)."""
    root = folder.resolve()
    target = (root / name).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return ToolResult.error(f"Skill {skill.name} has no file {name!r}.")
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ToolResult.error(f"{name} of skill {skill.name} could not be read: {exc}")
    return ToolResult(ok=True, output=text[:BODY_CAP])


def _shown(folder: Path, workspace: Path) -> str:
    try:
        return str(folder.resolve().relative_to(workspace.resolve()))
    except ValueError:
        return str(folder)
