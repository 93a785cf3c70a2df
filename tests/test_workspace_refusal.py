"""Issue 35, item 8: a credential folder, anything inside one, and a folder holding one are refused as
the workspace, by the real CLI and the library, as root and as kuser, with a clear message that
--allow-any-cwd does not lift; a project folder in the same home is the control that works.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from bwrap_runner import as_user
from tier_user import USERS, Person, people

LIBRARY = """
import sys
from keel.agent import Agent
from keel.engine.client import OpenAICompatEngine
from keel.engine.types import EngineError
try:
    Agent(OpenAICompatEngine(base_url="http://127.0.0.1:9/v1", model="m"), workspace=sys.argv[1], log_path=False)
    print("ACCEPTED")
except EngineError as exc:
    print("REFUSED", exc)
"""


@pytest.fixture(params=USERS)
def person(request: pytest.FixtureRequest) -> Iterator[Person]:
    for who in people(request.param):
        for rel, text in {".ssh/id_rsa": "SSH-KEY-MARK\n", ".aws/credentials": "AWS-MARK\n",
                          ".gnupg/private-keys-v1.d/k.key": "GPG-MARK\n", ".config/gcloud/adc.json": "GCLOUD-MARK\n",
                          ".local/share/keel/sessions/s.jsonl": "{}\n", "projects/app/main.py": "print(1)\n"}.items():
            (who.home / rel).parent.mkdir(parents=True, exist_ok=True)
            (who.home / rel).write_text(text)
        who.own(who.home)
        yield who


@pytest.mark.parametrize(("where", "why"), [
    (".ssh", "inside the credential folder ~/.ssh"),                       # the examples
    (".aws", "inside the credential folder ~/.aws"),
    (".gnupg/private-keys-v1.d", "inside the credential folder ~/.gnupg"),   # variants: a folder inside one,
    (".config", "holds the credential folder ~/.config/gcloud"),             # a parent of one,
    (".local/share/keel", "credential folder ~/.local/share/keel"),         # keel's own data
])
def test_credential_folders_and_their_parents_are_refused_as_the_workspace(person: Person, where: str,
                                                                            why: str) -> None:
    path = str(person.home / where)
    for flags in ((), ("--allow-any-cwd",)):
        listed = person.keel("tool", "list_dir", "{}", "--cwd", path, *flags)
        assert listed.returncode == 2 and why in listed.stderr and "nothing lifts this" in listed.stderr, listed.stderr
        assert "MARK" not in listed.stdout + listed.stderr and "id_rsa" not in listed.stdout
    ran = person.keel("run", "list the files", "--cwd", path, "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert ran.returncode == 2 and why in ran.stderr, ran.stderr
    library = subprocess.run([*as_user(person.user), sys.executable, "-c", LIBRARY, path], capture_output=True,
                             text=True, env=person.env(), cwd="/")
    assert library.stdout.startswith("REFUSED") and why in library.stdout, library.stdout + library.stderr


def test_a_project_folder_in_the_same_home_is_a_workspace(person: Person) -> None:
    listed = person.keel("tool", "list_dir", "{}", "--cwd", str(person.home / "projects" / "app"))
    assert listed.returncode == 0 and "main.py" in listed.stdout, listed.stderr
    library = subprocess.run([*as_user(person.user), sys.executable, "-c", LIBRARY, str(person.home / "projects" / "app")],
                             capture_output=True, text=True, env=person.env(), cwd="/")
    assert library.stdout.startswith("ACCEPTED"), library.stdout + library.stderr
