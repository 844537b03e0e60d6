from abc import ABCMeta
from typing import Any, ClassVar

class OffsetCommitRequest_v2(metaclass=ABCMeta):
    API_KEY: ClassVar[int]
    API_VERSION: ClassVar[int]
    def __init__(self, *fields: Any) -> None: ...

class OffsetCommitRequest_v3(OffsetCommitRequest_v2): ...

class OffsetFetchRequest(metaclass=ABCMeta):
    def __init__(
        self, consumer_group: str, partitions: list[tuple[str, list[int]]] | None
    ) -> None: ...
