import json
import subprocess
import sys

LOG = "tests/data/access.log"


def logstats(*args):
    return subprocess.run([sys.executable, "-m", "logstats", *args], capture_output=True, text=True)


def test_text_is_the_default():
    out = logstats(LOG)
    assert out.returncode == 0
    assert out.stdout.splitlines()[0] == "6 requests, 17408 bytes"


def test_json_format():
    out = logstats(LOG, "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["total"] == 6 and data["bytes"] == 17408
    assert data["by_status"] == {"200": 3, "404": 2, "500": 1}
    assert data["top_paths"][0] == {"path": "/index.html", "count": 3}


def test_explicit_text_format():
    assert logstats(LOG, "--format", "text").stdout == logstats(LOG).stdout
