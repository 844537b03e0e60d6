# Below aiokafka's public API: adapters/kafka/wire.py only.
from enum import IntEnum
from typing import Any

class CoordinationType(IntEnum):
    GROUP = 0
    TRANSACTION = 1

class BrokerMetadata:
    nodeId: int
    host: str
    port: int

class ClusterMetadata:
    def broker_metadata(self, broker_id: int) -> BrokerMetadata | None: ...

class AIOKafkaClient:
    cluster: ClusterMetadata
    def __init__(self, **options: Any) -> None: ...
    async def bootstrap(self) -> None: ...
    async def close(self) -> None: ...
    def get_random_node(self) -> int | None: ...
    def force_metadata_update(self) -> Any: ...
    async def send(self, node_id: int | None, request: Any) -> Any: ...
