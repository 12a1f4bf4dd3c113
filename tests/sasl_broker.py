"""A Kafka broker whose clients must log in (SASL PLAIN), as a team's own cluster asks: the harness's broker with its
SOURCE listener made ``SASL_PLAINTEXT``, on this machine or a test's host (``kafka = "KAFKA_BOOTSTRAP"`` tests)."""

from __future__ import annotations

from chaos.clusters.kafka.broker import KafkaBroker

USER, SECRET = "alice", "alice-s3cret-not-in-files"
ADMIN_SECRET = "admin-s3cret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_SECRET}" user_admin="{ADMIN_SECRET}" user_{USER}="{SECRET}";')
LOGIN_ENV = {"KAFKA_SASL_USERNAME": USER, "KAFKA_SASL_PASSWORD": SECRET, "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}


def with_sasl(settings: dict[str, str]) -> dict[str, str]:
    """``server.properties`` whose SOURCE listener takes SASL PLAIN logins only (alice's, the admin's)."""
    found = dict(settings)
    protocols = found["listener.security.protocol.map"]
    assert "SOURCE:PLAINTEXT" in protocols, protocols
    found["listener.security.protocol.map"] = protocols.replace("SOURCE:PLAINTEXT", "SOURCE:SASL_PLAINTEXT")
    found["listener.name.source.sasl.enabled.mechanisms"] = "PLAIN"
    found["listener.name.source.plain.sasl.jaas.config"] = JAAS
    return found


class SaslBroker(KafkaBroker):
    """The harness's broker on 127.0.0.1; ``source_bootstrap`` asks for a login (start it with no proxy)."""

    def settings(self) -> dict[str, str]:
        return with_sasl(super().settings())
