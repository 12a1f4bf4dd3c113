"""The hosts' file of ``--cluster ssh:FILE`` (chaos/clusters/ssh/hostsfile.py) and what a host reports
(chaos/clusters/ssh/checks.py):
every mistake is one line naming the field or host and the fix."""

from __future__ import annotations

import pytest

from chaos.clusters.ssh.checks import _java_major, parse_facts
from chaos.clusters.ssh.hostsfile import Host, is_ssh, load
from chaos.errors import UserError

GOOD = """
user = "root"
key = "id_ed25519"
known_hosts = "known_hosts"
shared = "/mnt/streamchaos"
master = "n1"
database = "n3"
kafka = "n2"
[[hosts]]
name = "n1"
address = "10.0.0.1"
[[hosts]]
name = "n2"
address = "10.0.0.2"
port = 2222
[[hosts]]
name = "n3"
address = "db.example"
"""


def write(tmp_path, text: str):
    (tmp_path / "id_ed25519").write_text("not read by the parser")
    (tmp_path / "known_hosts").write_text("")
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    return path


def test_a_good_file_names_hosts_master_database_and_paths_relative_to_itself(tmp_path):
    cluster = load(f"ssh:{write(tmp_path, GOOD)}")
    assert [str(h) for h in cluster.hosts] == ["n1 (10.0.0.1:22)", "n2 (10.0.0.2:2222)", "n3 (db.example:22)"]
    assert cluster.key == tmp_path / "id_ed25519" and cluster.known_hosts == tmp_path / "known_hosts"
    assert cluster.master_host == Host("n1", "10.0.0.1") and not cluster.existing and cluster.database == "n3"
    assert cluster.python == "python3" and cluster.workers == cluster.hosts and is_ssh("ssh:x")
    assert cluster.kafka == "n2" and load(write(tmp_path, GOOD.replace('kafka = "n2"\n', ""))).kafka is None
    existing = load(write(tmp_path, GOOD.replace('master = "n1"', 'master = "spark://10.0.0.9:7077"')))
    assert existing.existing and existing.master_host is None


@pytest.mark.parametrize("change, says", [
    (("user = \"root\"\n", ""), "user is missing"),
    (("master = \"n1\"", "master = \"n9\""), "master = 'n9' is neither a host"),
    (("master = \"n1\"", "master = \"spark://h\""), "an existing cluster is spark://HOST:PORT"),
    (("database = \"n3\"", "database = \"x\""), "database = 'x' is neither a host of the file"),
    (("kafka = \"n2\"", "kafka = \"broker\""), "kafka = 'broker' is neither a host of the file (n1, n2, n3) nor"),
    (("shared = \"/mnt/streamchaos\"", "shared = \"rel\""), "must be an absolute path"),
    (("shared = \"/mnt/streamchaos\"", "shared = \"s3a://bucket/runs\""), "a storage URL is not read yet; mount it"),
    (("port = 2222", "port = 70000"), "port 70000 must be a number from 1 to 65535"),
    (("name = \"n2\"", "name = \"n1\""), "two hosts are named 'n1'"),
    (("key = \"id_ed25519\"", "key = \"nokey\""), "does not exist; give the private key"),
    (("known_hosts = \"known_hosts\"", "known_hosts = \"none\""), "ssh-keyscan"),
    (("user = \"root\"", "usr = \"root\""), "unknown field 'usr'"),
    (("address = \"10.0.0.2\"", "address = \"10.0.0.2\"\nadress = 1"), "host 2: unknown field 'adress'"),
    (("[[hosts]]", "[hosts"), "is not valid TOML"),
])
def test_each_mistake_is_one_line_naming_the_field(tmp_path, change, says):
    path = write(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(UserError) as caught:
        load(f"ssh:{path}")
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_users_own_database_is_named_by_database_url_in_the_environment(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD.replace('database = "n3"', 'database = "DATABASE_URL"'))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(UserError, match="DATABASE_URL is not set: export DATABASE_URL=postgresql://"):
        load(f"ssh:{path}")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:hush@db.example/staging")
    cluster = load(f"ssh:{path}")
    assert cluster.user_database and "hush" not in repr(cluster)


def test_a_missing_file_says_where_to_write_it(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load(f"ssh:{tmp_path}/nope.toml")


def report(java='openjdk version "17.0.13" 2024-10-15', pyspark="4.3.0 /usr/lib/pyspark", iptables="/usr/sbin/iptables",
           shared="TOKEN", uid="0") -> str:
    return f"java={java}\npyspark={pyspark}\niptables={iptables}\nshared={shared}\nuid={uid}\n"


def test_a_host_that_has_everything_reports_no_problem_and_its_spark_home(tmp_path):
    cluster = load(write(tmp_path, GOOD))
    facts = parse_facts(cluster.hosts[0], report(), "TOKEN", "4.3.0", cluster)
    assert facts.problems == () and facts.spark_home == "/usr/lib/pyspark"


@pytest.mark.parametrize("fields, says", [
    ({"java": "sh: 1: java: not found"}, "no Java"),
    ({"java": 'openjdk version "11.0.2"'}, "Java 11; Spark 4 needs 17"),
    ({"pyspark": "ModuleNotFoundError: No module named 'pyspark'"}, "cannot import pyspark"),
    ({"pyspark": "4.1.0 /opt/pyspark"}, "pyspark 4.1.0 differs from the driver's 4.3.0"),
    ({"iptables": ""}, "no iptables"),
    ({"shared": ""}, "does not show this machine's files"),
    ({"uid": "1000"}, "is not root"),
])
def test_each_missing_piece_is_one_line_naming_the_host_and_the_fix(tmp_path, fields, says):
    cluster = load(write(tmp_path, GOOD))
    facts = parse_facts(cluster.hosts[1], report(**fields), "TOKEN", "4.3.0", cluster)
    assert len(facts.problems) == 1 and says in facts.problems[0], facts.problems
    assert facts.problems[0].startswith("host n2 (10.0.0.2:2222): ")


def test_java_versions_old_and_new():
    assert _java_major('openjdk version "1.8.0_392"') == 8 and _java_major('java version "21" 2023-09-19') == 21
    assert _java_major("bash: java: command not found") is None


def test_another_version_of_the_harness_gets_another_venv_on_the_hosts(tmp_path):
    from chaos.clusters.ssh.shipping import VENVS, venv_home

    deps = [tmp_path / "wheels" / "polars-2.1.0-cp39-abi3-manylinux_2_28_x86_64.whl"]
    one = venv_home([tmp_path / "own-aaaa" / "streamchaos-0.1.0-py3-none-any.whl", *deps])
    other = venv_home([tmp_path / "own-bbbb" / "streamchaos-0.1.0-py3-none-any.whl", *deps])
    again = venv_home([*deps, tmp_path / "own-aaaa" / "streamchaos-0.1.0-py3-none-any.whl"])
    assert one != other and one == again and one.startswith(f"{VENVS}/venv-")


def test_a_partition_of_the_broker_needs_its_host_in_the_file(tmp_path):
    """Without ``kafka = HOST`` the broker runs on this machine, where no iptables rule of a host reaches it: one
    line names the field and the channel fault to use instead; with it, the partition is the host's to carry out."""
    from chaos.run.admission import check_cluster_faults
    from chaos.scenario.scenario import Scenario

    cut = Scenario("kafka-windowed-count", events=1000, faults=["partition@2:planned/node=kafka/4s"])
    without = write(tmp_path, GOOD.replace('kafka = "n2"\n', ""))
    with pytest.raises(UserError, match=r"needs a Kafka host in .*hosts.toml \(kafka = HOST\): here cut the source "
                                        r"channel instead"):
        check_cluster_faults(cut, f"ssh:{without}")
    check_cluster_faults(cut, f"ssh:{write(tmp_path, GOOD)}")
