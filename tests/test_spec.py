import pytest

from chaos.errors import UserError
from chaos.scenario.faults import DAMAGE_MODES, Fault, parse_duration, parse_fault


@pytest.mark.parametrize(
    "text, action, batch, phase, args",
    [
        ("kill-driver@3:sink-done", "kill-driver", 3, "sink-done", ()),
        ("kill-executor@5:reading", "kill-executor", 5, "reading", ()),
        ("kill-executor@5:reading/1", "kill-executor", 5, "reading", ("1",)),
        ("pause-executor@2:reading/3s", "pause-executor", 2, "reading", ("3s",)),
        ("damage-checkpoint@6:committed/truncate-offsets", "damage-checkpoint", 6, "committed",
         ("truncate-offsets",)),
        ("kill-worker@0:planned/0/4s", "kill-worker", 0, "planned", ("0", "4s")),
    ],
)
def test_valid_specs_parse_and_print_back(text, action, batch, phase, args):
    fault = parse_fault(text)
    assert (fault.action, fault.batch, fault.phase, fault.args) == (action, batch, phase, args)
    assert fault.spec == text
    assert parse_fault(fault.spec) == fault


def test_arguments_are_interpreted():
    pause = parse_fault("pause-executor@2:reading/1/500ms")
    assert pause.duration == 0.5 and pause.index == 1 and pause.kind == "pause" and pause.target == "executor"
    damage = parse_fault("damage-checkpoint@4:committed/delete-commits")
    assert damage.mode == "delete-commits" and damage.duration is None
    assert parse_fault("kill-driver@1:planned").index is None


@pytest.mark.parametrize(
    "text, words",
    [
        ("kill-driver", "malformed"),
        ("kill-driver@x:sink-done", "malformed"),
        ("explode-driver@1:planned", "unknown fault action"),
        ("kill-driver@1:flushing", "unknown phase"),
        ("pause-driver@1:planned", "needs a duration"),
        ("damage-checkpoint@1:committed", "needs a mode"),
        ("kill-driver@1:planned/truncate-offsets", "only goes with damage-checkpoint"),
        ("kill-driver@1:planned/2", "one driver"),
        ("kill-executor@1:reading/sideways", "unknown argument"),
    ],
)
def test_malformed_specs_say_what_is_wrong(text, words):
    with pytest.raises(UserError) as info:
        parse_fault(text)
    message = str(info.value)
    assert words in message and "\n" not in message


def test_durations():
    assert parse_duration("3s") == 3.0
    assert parse_duration("250ms") == 0.25
    assert parse_duration("2m") == 120.0
    with pytest.raises(ValueError):
        parse_duration("3 seconds")


def test_every_damage_mode_is_accepted():
    for mode in DAMAGE_MODES:
        assert parse_fault(f"damage-checkpoint@0:committed/{mode}").mode == mode
    assert Fault("kill-driver", 1, "planned").spec == "kill-driver@1:planned"


def test_channel_faults_parse_with_attributes_and_durations():
    f = parse_fault("delay-sink@3:sink-write/latency=1500,jitter=500")
    assert f.channel and f.kind == "delay" and f.target == "sink"
    assert f.attributes == {"latency": 1500, "jitter": 500}
    assert f.spec == "delay-sink@3:sink-write/latency=1500/jitter=500"
    assert parse_fault(f.spec) == f
    cut = parse_fault("cut-sink@5:sink-write/3s")
    assert cut.channel and cut.duration == 3.0 and cut.attributes == {}
    assert parse_fault("down-source@2:planned/4s").kind == "down"
    assert parse_fault("reset-sink@5:sink-write").duration is None


@pytest.mark.parametrize("bad", [
    "cut-sink@5:sink-write/latency=100",   # attributes only for delay
    "delay-source@1:reading/0",            # a channel has no index
    "delay-source@1:reading/latency=abc",  # not a number
    "delay-elsewhere@1:reading",           # no such channel
])
def test_malformed_channel_faults_are_one_line_errors(bad):
    with pytest.raises(UserError) as err:
        parse_fault(bad)
    assert "\n" not in str(err.value)


def test_until_phase_is_for_channel_faults_only_and_excludes_a_duration():
    assert parse_fault("cut-sink@5:sink-write/until=committed").until == "committed"
    for bad, words in [("kill-driver@1:planned/until=committed", "only goes with channel faults"),
                       ("cut-sink@5:sink-write/3s/until=committed", "not both"),
                       ("cut-sink@5:sink-write/until=flush", "unknown phase 'flush'")]:
        with pytest.raises(UserError, match=words):
            parse_fault(bad)


def test_node_faults_parse_kill_pause_and_partition():
    kill, pause = parse_fault("kill-node@4:sink-write"), parse_fault("pause-node@2:reading/1/3s")
    assert (kill.kind, kill.target, kill.index) == ("kill", "node", None)
    assert (pause.kind, pause.target, pause.index, pause.duration) == ("pause", "node", 1, 3.0)
    oom = parse_fault("oom-node@3:reading/1/8s")
    assert (oom.kind, oom.target, oom.index, oom.duration) == ("oom", "node", 1, 8.0)
    with pytest.raises(UserError, match="oom fault needs a duration"):
        parse_fault("oom-node@3:reading/1")
    slow = parse_fault("slow-node@5:reading/0/8s")
    assert (slow.kind, slow.target, slow.index, slow.duration) == ("slow", "node", 0, 8.0)
    cut = parse_fault("partition@3:reading/node=1/10s")
    assert (cut.kind, cut.target, cut.index, cut.duration, cut.channel) == ("partition", "node", 1, 10.0, False)
    held = parse_fault("partition@3:reading/node=0/until=committed")
    assert (held.index, held.until, held.duration) == (0, "committed", None)
    assert held.spec == "partition@3:reading/node=0/until=committed"
    one_way = parse_fault("partition@3:reading/node=1/from=master/10s")
    assert (one_way.target, one_way.index, one_way.peer) == ("node", 1, ("from", "master"))
    both = parse_fault("partition@3:sink-write/node=sink/with=node=0/until=committed")
    assert (both.target, both.peer, both.until) == ("sink-db", ("with", "node=0"), "committed")
    for bad, words in [("partition@3:reading/node=1/from=node=1/5s", "not partitioned from itself"),
                       ("partition@3:reading/from=moon/5s", "unknown argument 'from=moon'"),
                       ("kill-node@3:reading/with=master", "unknown argument 'with=master'")]:
        with pytest.raises(UserError, match=words):
            parse_fault(bad)
    db = parse_fault("partition@3:sink-write/node=sink/10s")
    assert (db.kind, db.target, db.index, db.duration) == ("partition", "sink-db", None, 10.0)
    broker = parse_fault("partition@3:reading/node=kafka/5s")  # the broker's node
    assert (broker.target, broker.index, broker.peer, broker.duration) == ("broker", None, None, 5.0)
    with pytest.raises(UserError, match="reached through the fault proxies on the host's end"):
        parse_fault("partition@3:reading/node=kafka/from=node=0/5s")  # the job's traffic comes from the host
    for bad, words in [("partition@3:reading/node=x", "unknown argument 'node=x'"),
                       ("kill-driver@3:reading/node=1", "unknown argument 'node=1'"),
                       ("partition@3:reading/node=1/10s/until=committed", "not both"),
                       ("pause-node@3:reading", "a pause fault needs a duration"),
                       ("slow-node@3:reading/1", "a slow fault needs a duration")]:
        with pytest.raises(UserError, match=words):
            parse_fault(bad)


def test_a_database_partition_needs_a_pipeline_with_a_database():
    from chaos.run.admission import validate_schedule
    from chaos.scenario.scenario import Scenario
    from pipelines_under_test import resolve

    scenario = Scenario("key-count", events=1000, faults=["partition@3:sink-write/node=sink/10s"])
    with pytest.raises(UserError, match="key-count has no sink database; use a pg-\\* pipeline"):
        validate_schedule(scenario, resolve("key-count"))
    validate_schedule(Scenario("pg-append", events=1000, faults=["partition@3:sink-write/node=sink/10s"]),
                      resolve("pg-append"))
    broker = Scenario("key-count", events=1000, faults=["partition@3:reading/node=kafka/10s"])
    with pytest.raises(UserError, match="key-count reads no Kafka through the harness's broker"):
        validate_schedule(broker, resolve("key-count"))
    validate_schedule(Scenario("kafka-passthrough", events=1000, faults=["partition@3:reading/node=kafka/10s"]),
                      resolve("kafka-passthrough"))


def test_timed_faults_parse_print_back_and_refuse_what_needs_a_phase():
    f = parse_fault("pause-executor@12.5s/3s")
    assert f.timed and f.at_s == 12.5 and f.duration == 3.0 and f.spec == "pause-executor@12.5s/3s"
    assert parse_fault(f.spec) == f and not parse_fault("kill-driver@3:sink-done").timed
    assert parse_fault("kill-driver@7s").point < parse_fault("kill-driver@0:planned").point
    for bad, words in [("stop-driver@3s/1", "takes a phase"), ("cut-sink@2s/until=committed", "duration"),
                       ("pause-executor@2s", "needs a duration"), ("kill-driver@2s/3", "one driver")]:
        with pytest.raises(UserError, match=words):
            parse_fault(bad)


def test_random_timing_keeps_the_faults_and_draws_seeded_times_within_the_run():
    from chaos.scenario.random_times import at_random_times

    planned = ["kill-driver@3:sink-done", "cut-sink@2:reading/until=committed", "stop-driver@4:committed/1",
               "pause-executor@1:reading/3s"]
    timed = at_random_times(planned, 20.0, seed=7)
    assert timed == at_random_times(planned, 20.0, seed=7) != at_random_times(planned, 20.0, seed=8)
    faults = [parse_fault(t) for t in timed]
    assert [f.action for f in faults] == ["kill-driver", "cut-sink", "stop-driver", "pause-executor"]
    assert faults[2].spec == "stop-driver@4:committed/1"  # a clean stop waits for a commit: it keeps its phase
    assert faults[1].duration == 5.0 and faults[3].duration == 3.0
    assert all(0 <= f.at_s <= 20.0 for f in faults if f.timed) and sum(f.timed for f in faults) == 3
    # Uniform over [0, T]: many draws fill every tenth of the run.
    draws = [parse_fault(at_random_times(["kill-driver@1:reading"], 10.0, seed=s)[0]).at_s for s in range(400)]
    assert {int(d) for d in draws} == set(range(10)) and 4.0 < sum(draws) / len(draws) < 6.0


def test_several_brokers_need_docker_nodes_and_a_pipeline_that_reads_kafka_and_replay_with_their_count():
    from chaos.run.admission import validate_schedule
    from chaos.scenario.scenario import Scenario
    from pipelines_under_test import resolve

    with pytest.raises(UserError, match="--brokers 3 runs each broker as a node of its own: add --cluster docker"):
        validate_schedule(Scenario("kafka-passthrough", events=1000, brokers=3), resolve("kafka-passthrough"))
    with pytest.raises(UserError, match="key-count reads no Kafka"):
        validate_schedule(Scenario("key-count", events=1000, brokers=3, cluster="docker"), resolve("key-count"))
    with pytest.raises(UserError, match="--brokers must be at least 1"):
        Scenario("kafka-passthrough", brokers=0)
    three = Scenario("kafka-passthrough", events=1000, brokers=3, cluster="docker", faults=["kill-broker@2:reading"])
    validate_schedule(three, resolve("kafka-passthrough"))
    assert "--cluster docker --brokers 3" in three.command() and "--brokers" not in Scenario("x").command()
    from chaos.clusters.registry import kind_of

    assert "cannot fail over" in kind_of("docker").brokers_refusal(2)  # two voters lose the quorum with either
    assert kind_of("docker").brokers_refusal(3) is None and kind_of("standalone").brokers_refusal(1) is None


def test_a_topic_grows_at_its_phase_when_the_other_faults_go_to_random_times():
    """The records keyed to new partitions are those after its batch: --timing random leaves it where it is."""
    from chaos.scenario.random_times import at_random_times

    moved = at_random_times(["add-partitions@2:sink-done/2", "kill-driver@3:sink-done"], 30.0, seed=4)
    assert moved[0] == "add-partitions@2:sink-done/2" and moved[1].startswith("kill-driver@") and moved[1].endswith("s")
