"""The pure lease rules (core.ledger.leases)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_offset_sidecar.core.ledger.leases import (
    Ownership,
    claim_count,
    fair_share,
    release_count,
)


def test_commits_only_before_the_deadline_two_commit_timeouts_before_the_lease_ends() -> None:
    ownership = Ownership("r", lease=30.0, commit_timeout=10.0)
    assert ownership.epoch_for_commit("g", 0.0) is None  # never renewed
    ownership.renewed_at(100.0, {"g": 4})
    assert ownership.commit_deadline == 110.0
    assert ownership.epoch_for_commit("g", 109.9) == 4
    assert ownership.epoch_for_commit("g", 110.0) is None
    assert ownership.epoch_for_commit("other", 105.0) is None


def test_a_lease_shorter_than_two_commit_timeouts_is_refused() -> None:
    with pytest.raises(ValueError, match="two commit timeouts"):
        Ownership("r", lease=2.0, commit_timeout=1.0)


@given(st.integers(0, 10_000), st.integers(1, 50))
def test_fair_shares_cover_every_group_and_differ_by_at_most_one_share(
    groups: int, replicas: int
) -> None:
    share = fair_share(groups, replicas)
    assert share * replicas >= groups
    assert (share - 1) * replicas < groups or groups == 0


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(1, 10))
def test_a_replica_claims_up_to_and_releases_down_to_its_share(
    owned: int, groups: int, replicas: int
) -> None:
    claim, release = claim_count(owned, groups, replicas), release_count(owned, groups, replicas)
    assert claim >= 0
    assert release >= 0
    assert claim == 0 or release == 0
    assert owned + claim - release == fair_share(groups, replicas)
