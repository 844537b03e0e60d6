from abc import ABCMeta

class OffsetRequest(metaclass=ABCMeta):
    def __init__(
        self, replica_id: int, isolation_level: int, topics: list[tuple[str, list[tuple[int, int]]]]
    ) -> None: ...
