"""The pure core: the ledger's rules and everything they decide on.

Standard library only, no I/O, no clock of its own: offsets and their ranges
(``offsets``), what the ledger decides (``changes``), the ledger and its transition table
(``ledger``, ``ledger_state``), how a replica takes in stored groups (``replica_merge``),
the lease rules (``leases``), Burrow's status rules (``group_status``) and the parsing of
Spark's progress (``spark_progress``). May import: the standard library,
``spark_offset_sidecar.errors`` and itself (``tests/unit/test_layers.py``).
"""
