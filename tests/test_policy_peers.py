"""The peers' own shell-safety tests, ported as data (issue 33): Gemini CLI's shell-utils and policy
tests, Qwen Code's shell-utils, shellReadOnlyChecker and shellAstParser tests, and Codex's
dangerous-command tests (tests/fixtures/peers/, each case with repository, path and commit).

Every case is judged by keel's policy in the peer's terms (tests/peer_cases.py). Where keel
deliberately differs, the case records keel's verdict and a reason, each explained in
docs/policy.md ("The peers' suites"); a new difference fails here, and so does a recorded one
keel no longer has.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from peer_cases import agrees, expected, load, outcome, workspace

CASES = load()
DOC = (Path(__file__).parent.parent / "docs" / "policy.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("peers")
    return workspace(root / "ws"), workspace(root / "other")


@pytest.mark.parametrize("case", CASES, ids=[f"{c['file'][:-5]}:{c['index']}" for c in CASES])
def test_keel_judges_each_peer_case_as_recorded(case: dict, places: tuple[Path, Path]) -> None:
    got = outcome(case, *places)
    assert agrees(expected(case), got), (case["test"], case["command"][:200], got)


def test_the_port_is_whole_and_cited() -> None:
    assert len(CASES) >= 850
    for case in CASES:
        assert case["repo"] and case["path"] and re.fullmatch(r"[0-9a-f]{40}", case["commit"] or ""), case
    dangerous = [c for c in CASES if c["repo"] == "openai/codex" and c["peer"] is True]
    assert len(dangerous) == 19


def test_every_difference_is_documented() -> None:
    reasons = {c["why"] for c in CASES if "why" in c}
    section = DOC[DOC.index("### The peers' suites"):]
    missing = [why for why in reasons if f"`{why}`" not in section]
    assert not missing, missing
    differing = sum("why" in c for c in CASES)
    assert differing <= 0.1 * len(CASES), f"{differing} of {len(CASES)} cases differ"
