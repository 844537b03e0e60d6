"""The committer's hand-encoded OffsetCommit request is byte for byte aiokafka's own, for
any group, topics, partitions, offsets and metadata, on every broker version range, and
is answered through aiokafka's own response type. (A real broker takes it: the
committer's tests in tests/adapters/test_committer.py and every end-to-end test commit
through it.)"""

from __future__ import annotations

import pytest
from aiokafka.errors import IncompatibleBrokerVersion
from aiokafka.protocol.commit import OffsetCommitRequest
from hypothesis import given
from hypothesis import strategies as st

from spark_offset_sidecar.adapters.kafka.offset_commit_wire import OffsetCommit

names = st.text(min_size=1, max_size=40)  # any Unicode: lengths are of the UTF-8 bytes
partitions = st.lists(
    st.tuples(
        st.integers(0, 2**31 - 1),
        st.integers(-1, 2**63 - 1),
        st.text(max_size=300),
    ),
    min_size=1,
    max_size=12,
)
topics = st.lists(st.tuples(names, partitions), min_size=1, max_size=4)
VERSIONS = [{8: (2, 9)}, {8: (0, 8)}, {8: (2, 2)}, {8: (3, 3)}]


@given(group=names, topics=topics, correlation_id=st.integers(0, 2**31 - 1), client=names)
def test_the_same_bytes_as_aiokafka(
    group: str,
    topics: list[tuple[str, list[tuple[int, int, str]]]],
    correlation_id: int,
    client: str,
) -> None:
    for versions in VERSIONS:
        theirs = OffsetCommitRequest(group, -1, "", -1, topics).prepare(versions)
        ours = OffsetCommit(group, topics).prepare(versions)
        assert ours.encode() == theirs.encode()
        assert (
            ours.build_request_header(correlation_id, client).encode()
            == theirs.build_request_header(correlation_id, client).encode()
        )
        assert (ours.API_VERSION, ours.RESPONSE_TYPE) == (theirs.API_VERSION, theirs.RESPONSE_TYPE)
        assert ours.FLEXIBLE_VERSION is theirs.FLEXIBLE_VERSION is False


def test_a_broker_without_v2_or_v3_is_refused_by_name() -> None:
    with pytest.raises(IncompatibleBrokerVersion, match="OffsetCommit v4-v9"):
        OffsetCommit("g", [("t", [(0, 1, "")])]).prepare({8: (4, 9)})
