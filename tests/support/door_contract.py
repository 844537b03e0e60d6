"""The one door's contract, run by ``tests/e2e/test_aiokafka_contract.py`` in a virtual
environment with nothing but an aiokafka release (``harness.aiokafka_releases``):
``python door_contract.py BOOTSTRAP TOPIC GROUP`` runs every function of
``spark_offset_sidecar.adapters.kafka.wire`` against the broker (the topic has two
partitions and records on both) and prints what it read, as JSON, for the test to check.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiokafka
from aiokafka.abc import AbstractTokenProvider
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import AIOKafkaConnection
from aiokafka.errors import (
    GroupCoordinatorNotAvailableError,
    GroupLoadInProgressError,
    NotCoordinatorForGroupError,
    SaslAuthenticationFailed,
)

from spark_offset_sidecar.adapters.kafka import wire


class _Tokens(AbstractTokenProvider):
    def __init__(self) -> None:
        self.forgotten: list[str] = []

    async def token(self) -> str:
        return "a-token"

    def extensions(self) -> dict[str, str]:
        return {"logicalCluster": "lkc-1"}

    def forget(self, why: str) -> None:
        self.forgotten.append(why)


async def _oauth() -> dict[str, Any]:
    """The refusing authenticator, installed and stepped as aiokafka's connection steps it
    (a broker refusing tokens needs an issuer: tests/e2e/test_kafka_oauth.py)."""
    wire.refuse_oauth_error_challenge()
    tokens = _Tokens()
    connection = AIOKafkaConnection(
        "127.0.0.1", 9, sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=tokens
    )
    authenticator = connection.authenticator_oauth()
    first = await authenticator.step(None)
    try:
        await authenticator.step(b'{"status":"invalid_token"}')
        refused = ""
    except SaslAuthenticationFailed as exc:
        refused = str(exc)
    accepting = connection.authenticator_oauth()
    await accepting.step(None)
    return {
        "authenticator": type(authenticator).__name__,
        "first": None if first is None else [first[0].decode(), first[1]],
        "refused": refused,
        "forgotten": len(tokens.forgotten),
        "accepted": await accepting.step(b""),
    }


async def _run(bootstrap: str, topic: str, group: str) -> dict[str, Any]:
    options = {"bootstrap_servers": bootstrap, "client_id": "door-contract"}
    client = await wire.Client.started(options, 10_000)
    admin = AIOKafkaAdminClient(**options, request_timeout_ms=10_000)
    await admin.start()
    try:
        for _ in range(100):  # a brand-new broker creates __consumer_offsets first
            try:
                node, host, port = await client.find_coordinator(group)
                break
            except (
                GroupCoordinatorNotAvailableError,
                GroupLoadInProgressError,
                NotCoordinatorForGroupError,
            ):
                await asyncio.sleep(0.2)
        lane = await wire.Lane.open(host, port, options, request_timeout_ms=10_000)
        metadata = '{"committer":"door-contract"}'
        message = wire.OffsetCommit(group, [(topic, [(0, 3, metadata), (1, 4, "")])])
        for _ in range(100):
            answer = await lane.commit(message)
            codes = {c for _, rows in answer.topics or () for _, c in rows or ()}
            if codes != {14}:  # COORDINATOR_LOAD_IN_PROGRESS: again
                break
            await asyncio.sleep(0.2)
        lane_was_connected = lane.connected()
        lane.close()
        leaders = {
            p["partition"]: p["leader"]
            for t in await client.metadata([topic])
            for p in t["partitions"]
        }
        ends: dict[str, dict[int, int]] = {}
        for name, timestamp in (("latest", -1), ("earliest", -2)):
            for leader in set(leaders.values()):
                mine = [p for p, at in leaders.items() if at == leader]
                for _, rows in await client.list_offsets(leader, {topic: mine}, timestamp):
                    for partition, error, offset in rows:
                        assert error == 0, (name, partition, error)
                        ends.setdefault(name, {})[partition] = offset
        missing = f"{topic}-absent"
        absent = [t["error_code"] for t in await wire.topic_metadata(admin, [missing])]
        absent_again = [t["error_code"] for t in await client.metadata([missing])]
        return {
            "aiokafka": aiokafka.__version__,
            "coordinator": [node, host, port, client.broker(node)],
            "answer": answer.topics,
            "lane_was_connected": lane_was_connected,
            "committed": await wire.committed(admin, node, group),
            "group": list(await wire.describe_group(admin, node, group)),
            "ends": ends,
            "absent": absent + absent_again,
            "oauth": await _oauth(),
        }
    finally:
        await admin.close()
        await client.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_run(*sys.argv[1:4]))))
