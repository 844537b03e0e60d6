"""The running parts: the durable ledger (the core's ledger in front of a store port) and
the loops that drive it (``commit_loop``, ``lag_monitor``, ``lease_keeper``).

They see ports only: no adapter, no database or Kafka driver (``tests/unit/test_layers.py``).
"""
