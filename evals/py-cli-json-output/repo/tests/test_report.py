from logstats.parse import parse_file, parse_line
from logstats.report import render_text, summarize


def test_parse_line():
    entry = parse_line('1.2.3.4 - - [01/Jan/2024:00:00:00 +0000] "GET /x HTTP/1.1" 200 10')
    assert entry["path"] == "/x" and entry["status"] == 200 and entry["bytes"] == 10


def test_summary_and_text():
    summary = summarize(parse_file("tests/data/access.log"), top=2)
    assert summary["total"] == 6
    text = render_text(summary)
    assert text.splitlines()[0] == "6 requests, 17408 bytes"
    assert "      3  /index.html" in text
