"""Stored strings that reach the report, fuzzed with HTML and script payloads: in headless Chromium no payload
runs (each would mark the page) and the page asks for nothing on the network (Chromium's own network log)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reports.html import write_report
from tests.campaign_samples import make_campaign
from tests.test_campaign_store import chromium

# Each payload, if the browser ever ran it, sets a marker on <body> or asks a remote address for something.
PAYLOADS = [
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">",
    "\"><svg onload=\"document.body.setAttribute('data-pwned','svg')\">",
    "</script><script>document.body.setAttribute('data-pwned','script')</script>",
    "</title></style></textarea><script>document.body.setAttribute('data-pwned','close')</script>",
    "' onmouseover='document.body.setAttribute(\"data-pwned\",\"attr\")' x='",
    "<img src=\"http://198.51.100.7/pixel.png\"><link rel=stylesheet href=\"https://example.invalid/x.css\">",
    "javascript:document.body.setAttribute('data-pwned','href')",
    "\u2028\u2029<!--<script>document.body.setAttribute('data-pwned','comment')</script>-->",
]


def plant(root: Path, payload: str) -> None:
    """The payload in every stored string the report shows: a job reference (the pipeline's name in the plan,
    its rows and verdicts), Spark's error message (a result's reason), row values (anomalies' keys), a fault
    spec's detail, an unexpected row's explanation."""
    data = json.loads((root / "campaign.json").read_text())
    for entry in data["plan"]:
        entry["row"] = f"{entry['pipeline']} [{payload}]"
    (root / "campaign.json").write_text(json.dumps(data))
    for trial in (root / "trials").iterdir():
        verdict = json.loads((trial / "verdict.json").read_text())
        verdict["duplicated"] = [{**d, "key": payload} for d in verdict["duplicated"]] or \
            [{"id": 1, "key": payload, "batch": 2, "fault": payload}]
        verdict["unexpected"] = [{"id": 7, "why": payload}]
        (trial / "verdict.json").write_text(json.dumps(verdict))
        result = json.loads((trial / "result.json").read_text())
        result["reason"] = payload
        for f in result["faults"]:
            f["detail"] = {"error": payload}
        (trial / "result.json").write_text(json.dumps(result))


def load(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and every URL the page asked the network for: Chromium's net log, whose
    requests started by the page carry its origin as initiator (``null`` for a file); the browser's own
    background requests say "not an origin". The dead proxy only keeps them from leaving the machine."""
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium (apt-get install chromium; .ci/run installs it)")
    log = tmp_path / "net.json"
    quiet = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
             "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", f"--log-net-log={log}",
             "--dump-dom", page.as_uri()]
    dom = subprocess.run([browser, *quiet], capture_output=True, text=True, timeout=120).stdout
    text = log.read_text().rstrip()
    if not text.endswith("}"):  # a log cut short at exit: close its events list
        text = text.rstrip(",") + "]}"
    netlog = json.loads(text)
    start = netlog["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = [e["params"]["url"] for e in netlog.get("events", [])
            if e.get("type") == start and (e.get("params") or {}).get("initiator") not in (None, "not an origin")]
    return dom, [u for u in urls if not u.startswith(("file:", "data:", "blob:", "about:"))]


def marked(dom: str) -> bool:
    body = dom[dom.index("<body"):dom.index(">", dom.index("<body"))]
    return "data-pwned" in body


def test_the_checks_see_a_script_run_and_a_request_made(tmp_path):
    """The control: a page that does run a payload and does ask the network is caught by both checks."""
    page = tmp_path / "leaky.html"
    page.write_text("<html><body>" + PAYLOADS[0].replace("src=x", "src=x.png") + PAYLOADS[5] + "</body></html>")
    dom, urls = load(page, tmp_path)
    assert marked(dom)
    assert "http://198.51.100.7/pixel.png" in urls and "https://example.invalid/x.css" in urls


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_stored_string_runs_in_the_report_or_reaches_the_network(tmp_path, payload):
    make_campaign(tmp_path / "c", hostile=True)
    plant(tmp_path / "c", payload)
    dom, urls = load(write_report(tmp_path / "c"), tmp_path)
    assert 'class="badge v-at-least-once"' in dom and 'class="counterexample"' in dom  # scripts ran, page drawn
    assert not marked(dom)
    assert urls == []
