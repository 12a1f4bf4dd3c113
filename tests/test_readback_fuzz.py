"""Hostile input: every file the harness reads back, damaged (truncated, a field of the wrong type, bytes that
are not UTF-8, absurd numbers, huge), gives one clear line naming the file, or the verdict the intact run gets;
never a traceback and never a different verdict judged from what is left. No JVM.

The runs are written the way a trial writes them (tests/test_evidence.py, tests/campaign_samples.py);
Hypothesis picks the file, the damage and where it lands.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.campaign.stored import Campaign
from chaos.errors import UserError
from chaos.run.judge import judge
from chaos.store.evidence import freeze
from chaos.store.records import MAX_BYTES
from chaos.store.result import batch_offsets
from pipelines_under_test.files import COLUMNS
from reports.html import write_report
from tests.campaign_samples import make_campaign
from tests.conftest import cli
from tests.test_evidence import PER_BATCH, stored_run

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "80")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
JSON_VALUES = [None, True, 0, 1.5, "x", [], {}, -1, 10**30]


def json_paths(value, prefix=()):
    """Every place in a JSON document: (path of keys and indexes)."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from json_paths(v, (*prefix, i))


def replaced(doc, path, new):
    if not path:
        return new
    head, *rest = path
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[head] = replaced(doc[head], rest, new)
    return copy


@st.composite
def damage(draw, text: bytes, jsonl: bool = False):
    """(name, new bytes) of one damage to a JSON (or JSON-lines) file's bytes."""
    kind = draw(st.sampled_from(["truncate", "wrong-type", "not-utf8", "absurd", "garbage"]))
    if kind == "truncate":
        cut = draw(st.integers(0, len(text.rstrip()) - 1))
        return f"truncated at {cut}", text[:cut]
    if kind == "not-utf8":
        at = draw(st.integers(0, len(text)))
        return f"0xff at {at}", text[:at] + b"\xff\xfe" + text[at:]
    if kind == "garbage":
        return "garbage", draw(st.binary(min_size=1, max_size=64))
    lines = text.decode().splitlines() if jsonl else [text.decode()]
    n = draw(st.integers(0, len(lines) - 1))
    doc = json.loads(lines[n])
    path = draw(st.sampled_from(list(json_paths(doc))))
    if kind == "absurd":
        new_text = json.dumps(replaced(doc, path, 0)).replace(": 0", ": " + draw(st.sampled_from(
            ["1e999", "-1e999", "NaN", "Infinity", "9" * 5000, "[" * 5000 + "]" * 5000])), 1)
        if path == ():
            new_text = draw(st.sampled_from(["1e999", "9" * 5000, "[" * 5000 + "]" * 5000]))
    else:
        old = doc
        for p in path:
            old = old[p]
        # null is a campaign option's valid "not given" (``expect``: the declared guarantee): not a damage there.
        new = draw(st.sampled_from([v for v in JSON_VALUES if type(v) is not type(old)
                                    and not (v is None and tuple(path[:1]) == ("spec",))]))
        new_text = json.dumps(replaced(doc, path, new))
    lines[n] = new_text
    return f"{kind} at line {n} {list(path)}", ("\n".join(lines) + "\n").encode()


def assert_one_line(exc: UserError, name: str) -> None:
    message = str(exc)
    assert "\n" not in message and name in message, message


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    """A stored at-most-once run (batch 2 never written), frozen and judged: its verdict is the reference."""
    run_dir = tmp_path_factory.mktemp("intact") / "run"
    stored_run(run_dir, written_batches=[0, 1])
    freeze(run_dir)
    return run_dir, judge(run_dir)["verdict"]


def damaged_copy(run_dir: Path, tmp: Path, name: str, data: bytes) -> Path:
    copy = tmp / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy)
    (copy / name).write_bytes(data)
    return copy


@pytest.mark.parametrize("name", ["scenario.json", "result.json", "history.jsonl"])
def test_a_damaged_run_file_is_one_line_or_the_intact_verdict(intact, tmp_path, name):
    run_dir, verdict = intact
    text = (run_dir / name).read_bytes()

    @FUZZ
    @given(damage(text, jsonl=name.endswith(".jsonl")))
    def check(d):
        what, data = d
        copy = damaged_copy(run_dir, tmp_path, name, data)
        try:
            v = judge(copy)
        except UserError as exc:
            assert_one_line(exc, name)
        else:  # a field the checker does not read: the same evidence, the same verdict
            assert v["verdict"] == verdict, what

    check()


@pytest.mark.parametrize("name", ["events.parquet", "frozen/sink/sink.sqlite"])
def test_a_damaged_events_or_sink_file_is_one_line(intact, tmp_path, name):
    run_dir, _ = intact
    text = (run_dir / name).read_bytes()

    @FUZZ
    @given(st.integers(0, len(text) - 1), st.sampled_from(["truncate", "zero-page", "garbage"]))
    def check(at, how):
        data = {"truncate": text[:at], "zero-page": text[:at] + bytes(4096) + text[at + 4096:],
                "garbage": os.urandom(64)}[how]
        copy = damaged_copy(run_dir, tmp_path, name, data)
        try:
            v = judge(copy)
        except UserError as exc:
            assert_one_line(exc, Path(name).parent.name if "sink" in name else name)
        else:  # the damage missed every page that holds rows (SQLite free space, parquet padding) or changed them
            assert v["verdict"] in ("exactly-once", "at-least-once", "at-most-once", "none", "incorrect")

    check()


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory):
    """The stored run rewritten as a ``passthrough-file`` trial: a part file per batch and the sink's
    ``_spark_metadata`` log listing them, as Spark's file sink leaves them."""
    run_dir = tmp_path_factory.mktemp("parquet") / "run"
    stored_run(run_dir, written_batches=[0, 1, 2])
    scenario = json.loads((run_dir / "scenario.json").read_text())
    (run_dir / "scenario.json").write_text(json.dumps({**scenario, "pipeline": "passthrough-file"}))
    shutil.rmtree(run_dir / "sink")
    table, log = run_dir / "sink" / "table", run_dir / "sink" / "table" / "_spark_metadata"
    log.mkdir(parents=True)
    events = pl.read_parquet(run_dir / "events.parquet")
    for b in range(3):
        part = table / f"part-0000{b}-{b}.c000.snappy.parquet"
        events.filter(events["offset"] // PER_BATCH == b).select(*COLUMNS).write_parquet(part)
        entry = {"path": part.as_uri(), "size": part.stat().st_size, "isDir": False, "modificationTime": 1,
                 "blockReplication": 1, "blockSize": 1, "action": "add"}
        (log / str(b)).write_text("v1\n" + json.dumps(entry) + "\n")
    freeze(run_dir)
    v = judge(run_dir)
    assert v["verdict"] == "exactly-once", v["effect"]
    return run_dir


@pytest.mark.parametrize("name", ["frozen/sink/table/part-00001-1.c000.snappy.parquet",
                                  "frozen/sink/table/_spark_metadata/1"])
def test_a_damaged_parquet_sink_is_one_line_or_a_verdict_on_what_it_holds(parquet_run, tmp_path, name):
    text = (parquet_run / name).read_bytes()

    @FUZZ
    @given(st.integers(0, len(text) - 1), st.sampled_from(["truncate", "flip", "garbage", "not-utf8"]))
    def check(at, how):
        data = {"truncate": text[:at], "flip": text[:at] + bytes([text[at] ^ 0xFF]) + text[at + 1:],
                "garbage": os.urandom(64), "not-utf8": text[:at] + b"\xff\xfe" + text[at:]}[how]
        copy = damaged_copy(parquet_run, tmp_path, name, data)
        try:
            v = judge(copy)
        except UserError as exc:
            assert_one_line(exc, "sink")
        else:  # rows changed or gone: judged as what the sink now holds
            assert v["verdict"] in ("exactly-once", "at-least-once", "at-most-once", "none", "incorrect")

    check()


@pytest.mark.parametrize("name", ["scenario.json", "result.json", "history.jsonl"])
def test_a_huge_run_file_is_refused_unread(intact, tmp_path, name):
    run_dir, _ = intact
    copy = damaged_copy(run_dir, tmp_path, name, b"")
    with open(copy / name, "wb") as fh:  # sparse: no disk used, no time spent writing it
        fh.truncate(MAX_BYTES + 1)
    with pytest.raises(UserError, match="larger than anything streamchaos writes") as exc:
        judge(copy)
    assert_one_line(exc.value, name)


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign") / "c"
    make_campaign(root)
    return root


@pytest.mark.parametrize("name", ["campaign.json", "trials/passthrough-append-000/verdict.json",
                                  "trials/passthrough-append-000/result.json",
                                  "trials/passthrough-append-000/history.jsonl",
                                  "trials/passthrough-append-000/scenario.json", "shrinks/passthrough-append.json"])
def test_a_damaged_campaign_file_is_one_line_or_the_same_summary(campaign_dir, tmp_path, name):
    reference = Campaign.load(campaign_dir).summarize()["pipelines"]
    text = (campaign_dir / name).read_bytes()

    @FUZZ
    @given(damage(text, jsonl=name.endswith(".jsonl")))
    def check(d):
        what, data = d
        copy = tmp_path / "c"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(campaign_dir, copy)
        (copy / name).write_bytes(data)
        try:
            summary = Campaign.load(copy).summarize()
            write_report(copy)  # the report reads them too
        except UserError as exc:
            assert_one_line(exc, Path(name).name)
        else:
            assert {n: (r["verdict"], r["meets"]) for n, r in summary["pipelines"].items()} == {
                n: (r["verdict"], r["meets"]) for n, r in reference.items()}, what

    check()


def offsets_file(ends: dict) -> str:
    return 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + json.dumps(ends) + "\n"


@FUZZ
@given(st.integers(0, 2), st.one_of(st.binary(max_size=200), st.sampled_from(
    [b"v1\n{}\n{\"0\": \"x\"}", b"v1\n{}\n{\"0\": {\"value\": []}}", b"v1\n{}\n" + b"9" * 5000,
     b"v1\n{}\n" + b"[" * 5000, b"v1\n{}\n\xff\xfe", b"v1\n{}\n{\"0\": true}", b"v1\n{}\n1e999"])))
def test_damaged_checkpoint_offsets_and_commits_read_as_what_is_left(tmp_path, batch, data):
    checkpoint = tmp_path / "checkpoint"
    shutil.rmtree(checkpoint, ignore_errors=True)
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    for b in range(3):
        (checkpoint / "offsets" / str(b)).write_text(offsets_file({"0": 200 * (b + 1), "1": 100 * (b + 1)}))
        (checkpoint / "commits" / str(b)).write_bytes(data if b == batch else b'v1\n{"nextBatchWatermarkMs":0}\n')
    (checkpoint / "offsets" / str(batch)).write_bytes(data)
    offsets = batch_offsets(checkpoint)
    assert [o["batch"] for o in offsets] == [0, 1, 2] and all(o["committed"] for o in offsets)
    for o in offsets:
        for side in ("start", "end"):
            assert o[side] is None or all(type(v) is int for v in o[side].values())
    assert offsets[(batch + 1) % 3]["end"] == {"0": 200 * ((batch + 1) % 3 + 1), "1": 100 * ((batch + 1) % 3 + 1)}


def test_the_cli_says_one_line_and_exits_2_for_damaged_runs_and_campaigns(intact, campaign_dir, tmp_path):
    run_dir, _ = intact
    copy = damaged_copy(run_dir, tmp_path, "result.json", b'{"outcome": "drained", "seconds": 1, "offsets": "x", '
                                                          b'"faults": [], "deliveries": null}')
    run = cli("check", str(copy), cwd=tmp_path)
    assert run.rc == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip() == (f"error: {copy}/result.json: field 'offsets' is a string, expected a list: it is "
                                  "damaged; re-run the trial (streamchaos replay DIR)")

    copy = damaged_copy(run_dir, tmp_path, "history.jsonl", b'{"t": 1, "kind": "phase"\xff}\n')
    run = cli("check", str(copy), cwd=tmp_path)
    assert run.rc == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "history.jsonl is not UTF-8" in run.stderr

    c = tmp_path / "c"
    shutil.copytree(campaign_dir, c)
    for bad in (b"\xff" * 10, b"[1, 2]", b'{"format": "streamchaos-campaign", "version": 1, "spec": [], "plan": []}'):
        (c / "campaign.json").write_bytes(bad)
        for command in (["analyze", str(c)], ["report", str(c)], ["campaign", "resume", str(c)]):
            run = cli(*command, cwd=tmp_path)
            assert run.rc == 2 and len(run.stderr.strip().splitlines()) == 1, (command, run.stderr)
            assert "campaign.json" in run.stderr and "Traceback" not in run.stderr


def test_a_damaged_sqlite_sink_is_one_line_through_the_cli(intact, tmp_path):
    run_dir, _ = intact
    copy = damaged_copy(run_dir, tmp_path, "frozen/sink/sink.sqlite", b"SQLite format 3\x00" + bytes(200))
    run = cli("check", str(copy), cwd=tmp_path)
    assert run.rc == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "sink" in run.stderr and "unreadable" in run.stderr
    with pytest.raises(sqlite3.DatabaseError):  # the damage is real: SQLite itself refuses the file
        sqlite3.connect(copy / "frozen" / "sink" / "sink.sqlite").execute("SELECT * FROM output").fetchall()
