"""A clock for leases on PostgreSQL that the test moves (the ``lease_clock`` fixture)."""

from __future__ import annotations

from sqlalchemy import Float, bindparam


class LeaseClock:
    """The time a ``LeaseStore(now=clock.sql)`` sets and judges leases by, moved by the
    test alone (in production the database's clock, ``DATABASE_NOW``)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        # One parameter, read at each execution: every statement sees the current time.
        self.sql = bindparam("lease_clock", callable_=lambda: self.now, type_=Float)

    def advance(self, seconds: float) -> None:
        self.now += seconds
