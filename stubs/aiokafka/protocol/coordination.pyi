from abc import ABCMeta

class FindCoordinatorRequest(metaclass=ABCMeta):
    def __init__(self, coordinator_key: str, coordinator_type: int) -> None: ...
