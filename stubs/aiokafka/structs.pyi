from typing import NamedTuple

class BrokerMetadata(NamedTuple):
    nodeId: int
    host: str
    port: int
    rack: str | None

class TopicPartition(NamedTuple):
    topic: str
    partition: int
