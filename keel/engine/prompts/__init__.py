"""Prompt texts shipped with keel. The system prompt is static (no dates, no paths) so every
session, in every project, shares one byte-identical prefix with the engine's prefix cache."""

from __future__ import annotations

from importlib import resources


def system_prompt() -> str:
    return resources.files("keel.engine.prompts").joinpath("system.md").read_text(encoding="utf-8")


def task_message(task: str, workspace: str, protection: str) -> str:
    return (f"{task.strip()}\n\n---\nWorkspace: {workspace} (tool paths are relative to it)\n"
            f"Command sandbox: {protection}\nNo one is available to answer questions unless you are told so.")
