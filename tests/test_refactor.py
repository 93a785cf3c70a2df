"""Renames and moves by real refactoring (keel/drive/refactor.py): rope for Python, tree-sitter for
JavaScript; and a rename the task names, made by `keel run` from the request over real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_repo

from keel.core.request import parse_request
from keel.drive.refactor import (
    RefactorError,
    anchor,
    js_rename,
    js_specifiers,
    python_move,
    python_rename,
    request_renames,
)
from keel.testing import ScriptedEngineServer

# A package whose constant is used every way Python allows, beside a same-named local that is not it
# and strings that hold the name as data.
SETTINGS = ('"""Retry settings."""\n\n__all__ = ["MAX_RETRY", "TIMEOUT_S"]\n\n'
            "MAX_RETRY = 3  # MAX_RETRY counts tries, not retries\nTIMEOUT_S = 10\n")
CLIENT = ("import os\n\nimport shop.core.settings as conf\nfrom shop.core import settings\n"
          "from shop.core.settings import MAX_RETRY\n\n\n"
          "def attempts():\n    # one timeout per MAX_RETRY\n    return [conf.TIMEOUT_S] * conf.MAX_RETRY\n\n\n"
          "def limits():\n    return settings.MAX_RETRY, MAX_RETRY\n\n\n"
          "def describe():\n    key = \"MAX_RETRY\"   # the environment variable keeps its name\n"
          "    return f\"{key}={os.environ.get('MAX_RETRY', MAX_RETRY)}\"\n")
OTHER = "def count():\n    MAX_RETRY = 7   # a local of its own\n    return MAX_RETRY\n"
TESTS = ("from shop.client import attempts, describe, limits\nfrom shop.core.settings import MAX_RETRIES\n\n\n"
         "def test_attempts():\n    assert len(attempts()) == MAX_RETRIES == 3\n\n\n"
         "def test_limits():\n    assert limits() == (3, 3)\n\n\n"
         "def test_the_variable_keeps_its_name():\n    assert describe() == 'MAX_RETRY=3'\n")
PACKAGE = {"shop/__init__.py": "", "shop/core/__init__.py": "", "shop/core/settings.py": SETTINGS,
           "shop/client.py": CLIENT, "shop/other.py": OTHER}


def expected_client() -> str:
    return (CLIENT.replace("conf.MAX_RETRY\n", "conf.MAX_RETRIES\n")
            .replace("settings.MAX_RETRY, MAX_RETRY", "settings.MAX_RETRIES, MAX_RETRIES")
            .replace("import MAX_RETRY\n", "import MAX_RETRIES\n")
            .replace("# one timeout per MAX_RETRY", "# one timeout per MAX_RETRIES")
            .replace("'MAX_RETRY', MAX_RETRY)", "'MAX_RETRY', MAX_RETRIES)"))


def test_rope_renames_every_use_and_leaves_strings_and_a_same_named_local() -> None:
    changed = python_rename(dict(PACKAGE), "shop/core/settings.py", "MAX_RETRY", "MAX_RETRIES")
    assert sorted(changed) == ["shop/client.py", "shop/core/settings.py"]   # other.py's local is not the symbol
    assert changed["shop/client.py"] == expected_client()
    assert changed["shop/core/settings.py"] == SETTINGS.replace("MAX_RETRY", "MAX_RETRIES")   # __all__, comment too
    assert 'key = "MAX_RETRY"' in str(changed["shop/client.py"])   # data stays


def test_rope_renames_from_a_use_in_another_module_too() -> None:
    """The model's rewrite renamed ``conf.MAX_RETRY`` in client.py: rope starts from that use."""
    changed = python_rename(dict(PACKAGE), "shop/client.py", "MAX_RETRY", "MAX_RETRIES")
    assert changed["shop/client.py"] == expected_client()
    assert "MAX_RETRIES = 3" in str(changed["shop/core/settings.py"])


def test_a_method_rename_follows_the_type_not_the_word() -> None:
    """``Client.get`` becomes ``fetch`` where rope infers a Client; a dict's ``get`` stays (word for
    word, it was renamed too and the code broke)."""
    files = {"api.py": "class Client:\n    def get(self, url):\n        return url\n\n\ndef make():\n    return Client()\n",
             "app.py": "from api import Client, make\n\n\ndef run():\n    c, d = Client(), {}\n"
                       "    return c.get('x'), make().get('y'), d.get('k')\n"}
    changed = python_rename(files, "api.py", "get", "fetch")
    assert changed["app.py"] == files["app.py"].replace("c.get(", "c.fetch(").replace("make().get(", "make().fetch(")


def test_a_name_rope_cannot_place_is_refused_with_the_reason() -> None:
    with pytest.raises(RefactorError, match="not a name"):
        python_rename(dict(PACKAGE), "shop/other.py", "TIMEOUT_S", "TIMEOUT")
    assert anchor("def f(:\n", "f") is None


@pytest.mark.parametrize("importer, text, expected", [   # the cases word-for-word pointing had, and more
    ("app.py", "from shop.utils import clean, slug\n", "from shop.strings import clean, slug\n"),
    ("app.py", "import shop.utils\n\nshop.utils.clean(x)\n", "import shop.strings\n\nshop.strings.clean(x)\n"),
    ("app.py", "import os, shop.utils as u  # text\nu.clean(x)\n", "import os, shop.strings as u  # text\nu.clean(x)\n"),
    ("app.py", "from shop import utils, other\n\nutils.clean(other.x)\n",
     "from shop import strings, other\n\nstrings.clean(other.x)\n"),
    ("shop/cart.py", "from .utils import clean\n", "from .strings import clean\n"),
    ("shop/sub/x.py", "from ..utils import clean\n", "from ..strings import clean\n"),
    ("app.py", "from shop.utilsx import a\nimport utils\nfrom other.utils import b\nname = 'shop.utils'\n", None),
])
def test_a_module_renamed_in_its_package_is_imported_by_its_new_name(importer: str, text: str,
                                                                      expected: str | None) -> None:
    files = {"shop/__init__.py": "", "shop/sub/__init__.py": "", "shop/other.py": "x = 1\n",
             "shop/utils.py": "def clean(x):\n    return x\n\n\ndef slug(x):\n    return x\n", importer: text}
    changed = python_move(files, "shop/utils.py", "shop/strings.py")
    assert changed["shop/utils.py"] is None and changed["shop/strings.py"] == files["shop/utils.py"]
    assert changed.get(importer) == expected


def test_a_module_moved_to_another_package_keeps_its_line_ends_and_its_importers_follow() -> None:
    files = {"shop/__init__.py": "", "shop/utils.py": "def clean(x):\r\n    return x\r\n",
             "app.py": "from shop.utils import clean\r\n"}
    changed = python_move(files, "shop/utils.py", "shop/text/strings.py")
    assert changed["shop/text/strings.py"] == files["shop/utils.py"]
    assert changed["app.py"] == "from shop.text.strings import clean\r\n"
    with pytest.raises(RefactorError, match="not a Python module name"):
        python_move(files, "shop/utils.py", "shop/my-strings.py")


def test_javascript_identifiers_are_renamed_strings_stay_comments_follow() -> None:
    text = ("const { parseCfg } = require('./cfg');  // parseCfg reads the file\n"
            "const name = 'parseCfg';\nfunction run(x) { return `${parseCfg(x)} parseCfg`; }\n"
            "module.exports = { parseCfg, run, parseCfgX: 1 };\n")
    assert js_rename(text, "parseCfg", "loadConfig") == (
        "const { loadConfig } = require('./cfg');  // loadConfig reads the file\n"
        "const name = 'parseCfg';\nfunction run(x) { return `${loadConfig(x)} parseCfg`; }\n"
        "module.exports = { loadConfig, run, parseCfgX: 1 };\n")
    with pytest.raises(RefactorError, match="does not parse"):
        js_rename("function (", "a", "b")


def test_javascript_specifiers_are_the_module_strings_only() -> None:
    text = ('import x from "./a";\nexport * from \'./b.js\';\nconst c = require("./c");\n'
            'const d = await import("../d");\nconst e = "./e"; // require("./f")\n')
    assert [spec for _, _, spec in js_specifiers(text)] == ["./a", "./b.js", "./c", "../d"]
    start, end, spec = js_specifiers(text)[0]
    assert text[start:end] == spec


# -- through `keel run`, over real HTTP to the scripted engine --------------------------------------------
def test_keel_run_renames_a_package_constant_the_task_names_and_the_tests_pass(tmp_path: Path, run_keel,
                                                                               keel_env) -> None:
    """The task names the rename; the model's note names another new name. keel renames from the
    request by rope in every module, the string data stays, and the project's tests pass."""
    repo = make_repo(tmp_path / "repo", {**PACKAGE, "tests/test_client.py": TESTS})
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[engine]\nprofile = "small"\n')
    note = {"name": "change_file", "arguments": {"path": "shop/client.py", "change": "rename it to RETRY_LIMIT"}}
    script = [{"tool_calls": [note]}, {"tool_calls": [{"name": "finish", "arguments": {"summary": "renamed"}}]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "Rename MAX_RETRY to MAX_RETRIES in the shop package.", "--cwd", str(repo),
                     "--base-url", server.base_url, "--model", "scripted", "--output-format", "json")
        requests = server.requests
    assert r.code == 0, r.stderr
    assert r.result["status"] == "complete", r.result
    assert sorted(r.result["files_changed"]) == ["shop/client.py", "shop/core/settings.py"]
    assert (repo / "shop" / "client.py").read_text() == expected_client()
    assert (repo / "shop" / "other.py").read_text() == OTHER
    assert len(requests) == 2   # no editor request
    reply = next(m["content"] for m in requests[1]["messages"] if m.get("role") == "tool")
    assert "shop/client.py:" in reply and "'MAX_RETRY'" in reply   # the string is listed for the model to judge


@pytest.mark.parametrize("task, expected", [
    ("Rename MAX_RETRY to MAX_RETRIES everywhere.", [("MAX_RETRY", "MAX_RETRIES")]),
    ("The helper parse_cfg should be renamed to parse_config.", [("parse_cfg", "parse_config")]),
    ("rename Foo to Bar and baz_qux to quux_baz", [("Foo", "Bar"), ("baz_qux", "quux_baz")]),
    # keel acts on these without the model: an arrow or "replace" may be a mapping or an edit
    ("Each nucleotide maps to its complement: `G` -> `C`, `C` -> `G`.", []),   # exercism's rna-transcription
    ("replace `get_user` with `fetch_user`", []),
    ("change `timeout` to `retry_timeout`", []),
])
def test_the_request_names_a_rename_only_in_so_many_words(task: str, expected: list[tuple[str, str]]) -> None:
    assert [(r.old, r.new) for r in request_renames(parse_request(task))] == expected


def test_a_javascript_rename_the_task_names_reaches_every_file_and_leaves_strings(tmp_path: Path) -> None:
    from test_rename import call, run_script

    cfg = "// parseCfg reads the file\nfunction parseCfg(text) {\n  return JSON.parse(text);\n}\n" \
          "module.exports = { parseCfg };\n"
    app = "const { parseCfg } = require('./cfg');\nconst NAME = 'parseCfg';\nmodule.exports = () => parseCfg('{}');\n"
    ws = make_repo(tmp_path / "ws", {"lib/cfg.js": cfg, "lib/app.js": app})
    reply, asked = run_script(ws, [{"tool_calls": [call("change_file", path="lib/app.js", change="use the new name")]}],
                              verify=False, task="Rename parseCfg to loadConfig in lib/.")
    assert asked == 0, reply
    assert (ws / "lib" / "cfg.js").read_text() == cfg.replace("parseCfg", "loadConfig")
    assert (ws / "lib" / "app.js").read_text() == app.replace("{ parseCfg }", "{ loadConfig }").replace(
        "=> parseCfg(", "=> loadConfig(")
    assert "in: lib/app.js, lib/cfg.js." in reply and "lib/app.js:2: const NAME = 'parseCfg';" in reply
