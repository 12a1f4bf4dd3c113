"""The seeded-bug corpus (benchmarks/corpus/): every job is plain PySpark with a truth and a one-line bug."""

from __future__ import annotations

import ast
import json

from chaos.guarantees import GUARANTEES
from chaos.jobs.payloads import parse_schema
from chaos.jobs.reference import JobSpec
from tests.conftest import REPO

CORPUS = REPO / "benchmarks" / "corpus"
OURS = {"chaos", "properties", "pipelines_under_test", "reports", "streamchaos"}


def test_every_job_has_a_truth_and_every_truth_a_job():
    truths = json.loads((CORPUS / "truths.json").read_text())
    jobs = truths["jobs"]
    assert {p.stem for p in CORPUS.glob("*.py")} == set(jobs)
    parse_schema(truths["schema"])
    bugs = [n for n, j in jobs.items() if "bug" in j]
    twins = [n for n, j in jobs.items() if "twin_of" in j]
    assert len(bugs) >= 12 and len(twins) >= 6
    for name, job in jobs.items():
        assert job["truth"] in GUARANTEES, name
        kafka = "connector" if job["sink"].startswith("kafka") else ""  # a Kafka sink: on the Spark it is served for
        JobSpec(f"{name}:run", truths["schema"], job["sink"], tuple(k for k in job["key"].split(",") if k),
                kafka=kafka).validate()
        line = job.get("bug") or job.get("fix")
        assert line and "\n" not in line and len(line) <= 120, name
        if "twin_of" in job:  # a twin is the fixed job: exactly-once, of a job with a bug
            assert job["truth"] == "exactly-once" and "bug" in jobs[job["twin_of"]], name
        else:
            assert job["truth"] != "exactly-once", name


def test_the_jobs_are_plain_pyspark_with_an_entry_point():
    for path in CORPUS.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "pyspark" in imported and not imported & OURS, path.name
        assert any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body), path.name
        doc = ast.get_docstring(tree) or ""
        assert doc.startswith(("Bug: ", "Correct twin of ")), path.name
