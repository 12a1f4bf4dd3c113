"""The pytest plugin (entry point ``pytest11``): consistency checks of a user's pipeline in CI.

::

    @pytest.mark.consistency(expect="exactly-once", faults="kill")
    def test_orders_survive_crashes(chaos_check):
        chaos_check("my_pipelines:ORDERS")

``consistency(conf={"asyncProgressTrackingEnabled": ["false", "true"]})`` (or ``chaos_check(..., conf=...)``)
runs the check under every combination of the settings (``--conf`` of ``campaign run``) and fails on any
variant that violates the guarantee.

A job as written (a function that starts a streaming query, no streamchaos import) is checked with what the
harness needs beside it: ``chaos_check("jobs.orders:run", schema="customer STRING, amount LONG",
sink="postgres:totals", key="customer")`` (``streamchaos init`` writes such a test).

``chaos_check`` runs a small campaign (``--chaos-trials`` planned trials, ``--chaos-seed``) on the
session's harness (one Spark cluster for the whole test session), shrinks a violation and fails
the test with the minimal counterexample and its replay command. ``--chaos-report PATH`` writes
one HTML report of every check of the session. ``chaos_trial`` runs one scenario (for ``@given``
with ``properties.strategies``); ``chaos_harness`` is the session's harness itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chaos.errors import UserError
from chaos.machine.own_packages import bind, namesakes

if TYPE_CHECKING:
    from chaos.scenario.scenario import Scenario

# Loaded by every pytest session where streamchaos is installed: the harness, polars and Spark
# helpers are imported inside the fixtures, only by sessions that use them. The checker's and the report's
# packages (empty __init__ files) are bound now, before the project's root goes first on sys.path
# (``pythonpath = .``, a root conftest): a project's own properties.py or reports/ cannot replace them.
bind(("properties", "reports"))

MARKER = ("consistency(expect=None, faults='kill', pipeline=None, examples=(), conf=None, schema=None, sink=None, "
          "key=None, values=None): check a pipeline (or a job as written: schema, sink, key, values) under faults "
          "(conf: "
          "{'KEY': ['V1', 'V2']} runs it under every combination)")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamchaos", "streamchaos consistency checks")
    group.addoption("--chaos-trials", type=int, default=3,
                    help="planned trials per consistency check (default 3: they open every canonical window; "
                         "fewer passes with a weak-evidence warning)")
    group.addoption("--chaos-seed", type=int, default=0, help="seed of plans and event streams (default 0)")
    group.addoption("--chaos-report", default=None, metavar="PATH", help="write the session's HTML report here")
    group.addoption("--chaos-events", type=int, default=1000, help="events per trial (default 1000)")
    group.addoption("--chaos-shrink-trials", type=int, default=3, help="trials a shrink may spend (default 3)")
    group.addoption("--chaos-cluster", default="standalone",
                    help="standalone (started for the session), docker (Docker nodes; docker:IMAGE for your "
                         "image) or spark://HOST:PORT")
    group.addoption("--chaos-no-standby", action="store_true", default=False,
                    help="restart killed drivers cold (default: pre-warmed standby and spare drivers)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    same = namesakes(config.rootpath)
    if same:  # one interpreter holds one module per name: say which the session's imports get
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"streamchaos: this project's {', '.join(same)} has the name of a streamchaos package; in this session "
            f"`import {same[0]}` gives streamchaos's (its checks need it): rename yours if your tests import it"),
            stacklevel=2)
    config._streamchaos_campaigns = []  # campaign directories of this session, for --chaos-report


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.getoption("--chaos-report", default=None)
    campaigns = getattr(config, "_streamchaos_campaigns", [])
    if path and campaigns:
        from reports.html import write_session_report

        out = write_session_report(campaigns, Path(path))
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write_line(f"streamchaos report: {out}")


@pytest.fixture(scope="session")
def chaos_harness(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One harness (cluster, event log, proxies, database when needed) for every check of the session."""
    from chaos.run.harness import Harness

    cluster = request.config.getoption("--chaos-cluster")
    try:
        harness = Harness(cluster=cluster, workdir=tmp_path_factory.mktemp("streamchaos-harness"),
                          standby=not request.config.getoption("--chaos-no-standby"),
                          data_dir=tmp_path_factory.getbasetemp()).__enter__()  # the checks' campaigns live there
    except UserError as exc:
        pytest.fail(f"streamchaos cannot start: {exc}", pytrace=False)
    yield harness
    harness.close()


def _marker_options(node) -> dict:
    marker = node.get_closest_marker("consistency")
    return dict(marker.kwargs) if marker else {}


@pytest.fixture
def chaos_check(request: pytest.FixtureRequest, chaos_harness, tmp_path_factory):
    """``chaos_check(pipeline=None, *, expect=None, faults=None, examples=None) -> summary row``.

    Arguments default to the test's ``consistency`` marker; ``expect`` defaults to the pipeline's
    declared guarantee. Fails the test with the minimal counterexample when the pipeline violates it.
    """
    config = request.config

    def check(pipeline: str | None = None, *, expect: str | None = None, faults: str | None = None,
              examples: list[str] | tuple[str, ...] | None = None, trials: int | None = None,
              conf: dict | list[str] | None = None, schema=None, sink: str | None = None,
              key: str | tuple[str, ...] | None = None, values: list[str] | None = None,
              id: str | None = None, args: list[str] | None = None,  # noqa: A002 - the CLI's --id
              sql_init: list[str] | None = None, time: str | None = None, kafka_value: str | None = None) -> dict:
        from chaos.campaign.runner import Runner
        from chaos.campaign.stored import Campaign, CampaignSpec, slug
        from chaos.guarantees import BATCH_DEPENDENT
        from chaos.jobs.reference import job_ref
        from properties.planning import parse_kinds

        options = _marker_options(request.node)
        pipeline = pipeline or options.get("pipeline")
        if not pipeline:
            raise pytest.UsageError("chaos_check needs a pipeline: chaos_check('module:attr') or "
                                    "@pytest.mark.consistency(pipeline='module:attr')")
        try:  # a job as written: its payload schema, sink, key and values (chaos/jobs/reference.py)
            pipeline = job_ref(pipeline, schema or options.get("schema"), sink or options.get("sink"),
                               key or options.get("key"), values or options.get("values"),
                               args=_listed(args or options.get("args")), id_name=id or options.get("id"),
                               sql_init=_listed(sql_init or options.get("sql_init")),
                               time=time or options.get("time"),
                               encoding=kafka_value or options.get("kafka_value"))
        except UserError as exc:
            pytest.fail(f"streamchaos: {exc}", pytrace=False)
        spec = CampaignSpec(
            pipelines=[pipeline], expect=expect or options.get("expect"),
            kinds=list(parse_kinds(faults or options.get("faults"))),
            trials=trials or config.getoption("--chaos-trials"), seed=config.getoption("--chaos-seed"),
            events=config.getoption("--chaos-events"), shrink_trials=config.getoption("--chaos-shrink-trials"),
            examples=list(examples if examples is not None else options.get("examples", ())),
            cluster=chaos_harness.cluster_spec, workers=chaos_harness.workers,
            conf=conf_matrix(conf if conf is not None else options.get("conf")),
        )
        root = tmp_path_factory.mktemp(f"chaos-{slug(request.node.name)[:40]}")
        try:
            campaign = Campaign.create(root / "campaign", spec,
                                       owns_workers=chaos_harness.cluster.owns_workers)
        except UserError as exc:
            pytest.fail(f"streamchaos: {exc}", pytrace=False)
        config._streamchaos_campaigns.append(campaign.root)
        summary = Runner(campaign, chaos_harness).run()
        rows = {name: row for name, row in summary["pipelines"].items() if row.get("pipeline", name) == pipeline}
        if not rows:
            reason = "; ".join(s["reason"] for s in summary["skipped"]) or "no trial ran"
            pytest.skip(f"{pipeline}: {reason}")
        violations = [describe_violation(name, row, campaign.root) for name, row in rows.items()
                      if row["meets"] is False]
        if violations:
            pytest.fail("\n".join(violations), pytrace=False)
        for name, row in rows.items():
            if row["meets"] is None:
                why = ("its output differs from Spark's one-batch answer without any fault: it depends on how the "
                       "stream is cut into micro-batches" if row["verdict"] == BATCH_DEPENDENT else
                       f"Spark refused the configuration in {row['refused']} trial(s)" if row.get("refused")
                       else f"{row['stalled']} stalled trial(s)")
                pytest.fail(f"{name}: inconclusive ({why}); runs in {campaign.root}", pytrace=False)
            if row.get("weak") or row.get("late_writes"):
                import warnings

                warnings.warn(weak_evidence(name, row), ChaosWeakEvidence, stacklevel=2)
        # One row; with configuration variants, the rows by name (``pipeline [key=value, ...]``).
        return next(iter(rows.values())) if len(rows) == 1 and not spec.conf else rows

    return check


def conf_matrix(conf: dict | list[str] | tuple[str, ...] | None) -> dict[str, list[str]] | None:
    """A check's configuration variants: ``{"KEY": ["V1", "V2"]}`` (or a single value), or ``["KEY=V1,V2"]``
    as on the command line."""
    from chaos.scenario.variants import parse_matrix

    if not conf:
        return None
    try:
        if isinstance(conf, dict):
            return parse_matrix([f"{k}={','.join(v) if isinstance(v, list | tuple) else v}" for k, v in conf.items()])
        return parse_matrix(list(conf))
    except UserError as exc:
        raise pytest.UsageError(f"streamchaos: {exc}") from None


class ChaosWeakEvidence(UserWarning):
    """A check that passed on less than it claims: a canonical window never opened, no fault fired, or rows
    that reached the sink after a trial ended."""


def weak_evidence(pipeline: str, row: dict) -> str:
    parts = []
    if row.get("weak"):
        parts.append(f"no violation of {row['declared']} found in {row['trials']} trial(s) "
                     f"({row.get('faulted_trials', 0)} with a fired fault), but windows not covered: "
                     f"{', '.join(row.get('not_covered') or []) or 'none'} (raise --chaos-trials)")
    if row.get("late_writes"):
        parts.append(f"its sink changed after trial(s) {', '.join(row['late_writes'])} ended")
    return f"{pipeline}: " + "; ".join(parts)


def describe_violation(pipeline: str, row: dict, root: Path) -> str:
    lines = [f"{pipeline} violates {row['declared']}: measured {row['verdict']} over {row['trials']} trial(s)"]
    ce = row.get("counterexample")
    if ce:
        lines += [f"minimal counterexample: {' '.join(ce['minimal']) or 'no fault'} -> {ce['verdict']} "
                  f"(shrunk from {' '.join(ce['from_faults'])})",
                  f"replay: {ce['command']}"]
    lines.append(f"runs: {root}")
    return "\n".join(lines)


@pytest.fixture
def chaos_trial(chaos_harness, tmp_path_factory):
    """``chaos_trial(scenario) -> verdict report``: one trial on the session's harness, checked."""
    from chaos.campaign.stored import slug
    from chaos.run.judge import judge

    def run(scenario: Scenario) -> dict:
        run_dir = tmp_path_factory.mktemp(f"trial-{slug(scenario.pipeline)[:30]}")
        chaos_harness.trial(scenario, run_dir / "run")
        return judge(run_dir / "run")

    return run


def _listed(value) -> list[str] | None:
    """One string as a list of one (``sql_init="init.sql"``), not of its characters."""
    return [value] if isinstance(value, str) else value
