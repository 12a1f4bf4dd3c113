"""A kind of cluster is a capability object: the harness, the nemesis, the admission of a trial and the campaign's
planner ask it, never which kind it is. Shown with a toy kind registered by one line (tests/toy_cluster.py). No JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.campaign.stored import refused_by
from chaos.clusters import registry
from chaos.errors import UserError
from chaos.machine.processes import Owned
from chaos.nemesis.actions import Nemesis
from chaos.nemesis.controller import History
from chaos.run.admission import check_cluster_faults
from chaos.scenario.faults import parse_fault
from chaos.scenario.scenario import Scenario
from properties.planning import applicable_actions


@pytest.fixture
def toy(monkeypatch):
    import toy_cluster

    monkeypatch.setattr(registry, "KINDS", list(registry.KINDS))
    registry.register(r"toy", "toy_cluster:ToyCluster")  # the one line a new kind adds
    toy_cluster.EVENTS.clear()
    return toy_cluster


def test_a_new_kind_is_one_registry_line_and_refuses_through_the_interface(toy):
    assert registry.kind_of("toy") is toy.ToyCluster
    with pytest.raises(UserError, match="a toy worker cannot be paused, only killed"):
        check_cluster_faults(Scenario("key-count", faults=["pause-worker@2:reading/1s"]), "toy")
    with pytest.raises(UserError, match="needs --cluster docker"):  # what the base kind refuses, it refuses too
        check_cluster_faults(Scenario("key-count", faults=["kill-node@2:reading"]), "toy")
    check_cluster_faults(Scenario("key-count", faults=["kill-worker@2:reading"]), "toy")
    # The planner plans exactly what the kind accepts.
    kinds = ["kill", "pause", "node"]
    planned = applicable_actions(kinds, sink_channel=False, database=False, refused=refused_by("toy"))
    assert "kill-worker" in planned and "pause-worker" not in planned and "kill-node" not in planned


def test_the_nemesis_carries_out_a_fault_through_the_kinds_methods(toy, tmp_path):
    cluster = registry.make_cluster("toy", Owned(), tmp_path)
    assert cluster.spec == "toy" and cluster.local_jvms
    nemesis = Nemesis(cluster, lambda: None, lambda: "app-1", Path(tmp_path), History())
    done = nemesis.fire(parse_fault("kill-worker@2:reading/1ms"), {})
    nemesis.wait_heals(10)
    assert done == {"done": True, "worker": 0, "pid": 4242, "downtime": 0.001}
    assert toy.EVENTS == [("kill-worker", 0), ("restart-worker", 0)]
    with pytest.raises(LookupError, match="node faults need --cluster docker"):
        nemesis.fire(parse_fault("kill-node@2:reading"), {})


def test_every_kind_answers_the_same_questions_before_anything_starts():
    """The kinds the registry names, asked what they refuse: worker faults on a cluster of the user's, node faults
    off Docker nodes, a partition of the sink database where it is no machine of its own."""
    worker, node, decommission = (parse_fault(s) for s in ("kill-worker@1:reading", "kill-node@1:reading",
                                                           "decommission-worker@1:reading"))
    sink = parse_fault("partition@1:reading/node=sink/3s")
    standalone, docker, external = "standalone", "docker", "spark://127.0.0.1:7077"
    assert registry.refusal(worker, standalone) is None and registry.refusal(node, standalone)
    assert registry.refusal(node, docker) is None and registry.refusal(worker, docker)
    assert registry.refusal(decommission, docker) is None and registry.refusal(sink, docker) is None
    assert registry.refusal(worker, external) and registry.refusal(decommission, external)
    assert registry.refusal(sink, standalone) and "cut the sink channel" in registry.refusal(sink, standalone)
    broker = parse_fault("partition@1:reading/node=kafka/3s")  # the Kafka broker is a node of its own on Docker only
    assert registry.refusal(broker, docker) is None and "cut the source channel" in registry.refusal(broker, standalone)
    with pytest.raises(UserError, match="unknown cluster 'yarn'"):
        registry.kind_of("yarn")
