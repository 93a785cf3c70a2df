"""The static HTML report, rendered by a real headless Chromium (selenium): charts present and non-empty."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from keel.eval.report import report_html, summary_markdown, write_report


def record(case, agent, repeat, word, steps, wall, prompt, stop="complete", category="bugfix"):
    return {"key": f"{case}__{agent}__r{repeat}", "case": {"id": case, "category": category, "size": "small"},
            "agent": agent, "repeat": repeat, "outcome": word, "stop_reason": stop, "status": "complete",
            "grade": {"checks": [{"kind": "command", "target": "pytest -q", "passed": word == "success",
                                  "detail": "" if word == "success" else "exit 1\nFAILED test_x - assert 1 == 2"}]},
            "metrics": {"steps": steps, "wall_s": wall, "prompt_tokens": prompt, "cached_tokens": prompt // 2,
                        "idle_turns": 1, "pushbacks": {"unverified": 1} if agent == "keel" else {"format_error": 2}}}


RECORDS = [
    record("py-add", "keel", 1, "success", 5, 12.0, 9000),
    record("py-add", "keel", 2, "success", 6, 14.0, 9500),
    record("py-fix", "keel", 1, "false_done", 3, 8.0, 6000),
    record("py-fix", "keel", 2, "failed", 30, 90.0, 40000, stop="limit:steps"),
    record("py-add", "mini-swe-agent", 1, "success", 9, 20.0, 12000),
    record("py-fix", "mini-swe-agent", 1, "error", 0, 1.0, 0, stop=None),
]


def test_markdown_summary_puts_false_done_first_with_its_failing_check():
    md = summary_markdown(RECORDS)
    assert md.index("## False done: 1") < md.index("## Per case")
    assert "- **py-fix** (keel, repeat 1): command `pytest -q`: exit 1 · FAILED test_x - assert 1 == 2" in md
    assert "| py-fix | bugfix | small | ✗! ✗ (3/30 steps) | E (0 steps) |" in md
    assert "| keel | 4 | 2 (50%) | 0 | 1 | 1 | 0 |" in md


def test_html_is_self_contained():
    html = report_html(RECORDS)
    assert not re.search(r"<(script|link|img)\b", html)          # nothing to fetch, nothing to run
    assert not re.search(r"(src|href)=", html)


def _driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_bin = shutil.which("chromedriver")
    if not chromium or not driver_bin:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,2400"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver_bin), options=options)


def test_report_renders_in_headless_chromium_with_non_empty_charts(tmp_path: Path):
    _md, html = write_report(tmp_path, RECORDS)
    driver = _driver()
    try:
        driver.get(html.as_uri())
        from selenium.webdriver.common.by import By

        banner = driver.find_element(By.ID, "false-done")
        assert banner.get_attribute("data-count") == "1" and "False done: 1" in banner.text
        for chart_id in ("success-grid", "chart-peer", "chart-tokens", "chart-time", "chart-steps", "chart-stops",
                         "chart-pushbacks"):
            chart = driver.find_element(By.ID, chart_id)
            size = chart.size
            assert size["width"] > 100 and size["height"] > 30, (chart_id, size)
            marks = chart.find_elements(By.CSS_SELECTOR, ".mark")
            assert marks, f"{chart_id} has no marks"
            drawn = [m for m in marks if m.size["width"] > 0 and m.size["height"] > 0]
            assert drawn, f"{chart_id}: every mark has zero size"
        grid = driver.find_element(By.ID, "success-grid")
        cells = grid.find_elements(By.CSS_SELECTOR, "rect.cell")
        assert len(cells) == 2 * 4  # 2 cases × (keel r1, r2, mini-swe-agent r1, r2)
        classes = sorted(c.get_attribute("class").split()[-1] for c in cells)
        assert classes == ["error", "failed", "false_done", "missing", "missing", "success", "success", "success"]
        # one dot per run that did not error, per agent
        assert len(driver.find_element(By.ID, "chart-tokens").find_elements(By.CSS_SELECTOR, "circle.mark")) == 5
        assert driver.find_element(By.ID, "agents").text.count("mini-swe-agent") == 1
    finally:
        driver.quit()


def test_numbers_are_grouped_alike_whole_or_not(tmp_path: Path, run_keel):
    """A median of an even count may fall between two runs: 12,992.5 beside 13,066, not 12992.5."""
    import json

    results = tmp_path / "out" / "results"
    results.mkdir(parents=True)
    for r in [record("a", "keel", 1, "success", 5, 12.0, 12992), record("a", "keel", 2, "success", 5, 13.0, 12993),
              record("a", "mini-swe-agent", 1, "success", 9, 20.0, 13066)]:
        (results / f"{r['key']}.json").write_text(json.dumps(r))
    out = run_keel("eval", "report", str(tmp_path / "out"))
    assert out.code == 0, out.stderr
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "12,992.5" in md and "13,066" in md and "12992.5" not in md
