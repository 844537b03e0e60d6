from abc import ABCMeta

class DescribeGroupsRequest(metaclass=ABCMeta):
    def __init__(self, groups: list[str], include_authorized_operations: bool = ...) -> None: ...
